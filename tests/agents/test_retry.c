/* Unit tests of the retry policy of the LLM agents: Retry-After in both forms (and garbage),
 * which statuses are retried, and exponential backoff with jitter inside its bounds. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plugins/llm/llm.h"

static void test_retry_after(void **state)
{
	(void)state;
	time_t now = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */
	assert_int_equal(kg_retry_after_ms("3", now), 3000);
	assert_int_equal(kg_retry_after_ms(" 0 ", now), 0);
	assert_int_equal(kg_retry_after_ms("120\r\n", now), 120000);
	assert_int_equal(kg_retry_after_ms("Sun, 06 Nov 1994 08:49:47 GMT", now), 10000); /* IMF-fixdate */
	assert_int_equal(kg_retry_after_ms("Sunday, 06-Nov-94 08:50:37 GMT", now), 60000); /* RFC 850 */
	assert_int_equal(kg_retry_after_ms("Sun Nov  6 08:49:39 1994", now), 2000); /* asctime */
	assert_int_equal(kg_retry_after_ms("Sun, 06 Nov 1994 08:00:00 GMT", now), 0); /* in the past */
	assert_int_equal(kg_retry_after_ms("99999999999999999999999", now), LONG_MAX);
	assert_int_equal(kg_retry_after_ms("1.5", now), -1);
	assert_int_equal(kg_retry_after_ms("10s", now), -1);
	assert_int_equal(kg_retry_after_ms("-1", now), -1);
	assert_int_equal(kg_retry_after_ms("soon", now), -1);
	assert_int_equal(kg_retry_after_ms("", now), -1);
	assert_int_equal(kg_retry_after_ms(NULL, now), -1);
}

static void test_retryable(void **state)
{
	(void)state;
	const long yes[] = {408, 409, 429, 500, 502, 503, 504, 529, 599};
	const long no[] = {200, 301, 400, 401, 403, 404, 413, 422, 600};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(kg_http_retryable(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(kg_http_retryable(no[i]));
}

static void test_backoff(void **state)
{
	(void)state;
	/* d = min(max, base * 2^attempt); the wait is in [d/2, d] */
	const long base = 100, max = 5000;
	for (int attempt = 0; attempt < 40; attempt++) {
		long d = base;
		for (int i = 0; i < attempt && d < max; i++)
			d *= 2;
		if (d > max)
			d = max;
		assert_int_equal(kg_backoff_ms(attempt, base, max, 0), d / 2);
		assert_int_equal(kg_backoff_ms(attempt, base, max, (uint32_t)(d - d / 2)), d);
		for (uint32_t r = 1; r < 100000u; r = r * 7 + 3) {
			long w = kg_backoff_ms(attempt, base, max, r);
			assert_true(w >= d / 2 && w <= d);
		}
	}
	/* jitter actually varies */
	assert_true(kg_backoff_ms(3, base, max, 1) != kg_backoff_ms(3, base, max, 2));
	assert_int_equal(kg_backoff_ms(5, 0, max, 123), 0);
	assert_int_equal(kg_backoff_ms(1000000, base, LONG_MAX, 0), LONG_MAX / 2);
}

static void test_redact(void **state)
{
	(void)state;
	char out[256];
	kg_url_redact("https://user:secret@api.example.com/v1", out, sizeof(out));
	assert_string_equal(out, "https://***@api.example.com/v1");
	kg_url_redact("http://127.0.0.1:8080/v1/x@y", out, sizeof(out));
	assert_string_equal(out, "http://127.0.0.1:8080/v1/x@y");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_retryable),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_redact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
