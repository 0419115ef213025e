/* When and how long to wait before retrying an LLM request: which statuses are transient, what a
 * Retry-After header asks for (seconds or an HTTP-date), and exponential backoff with jitter so
 * that many clients hitting one rate limit do not retry in lockstep. */
#include "plugins/llm/llm.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

long kg_retry_after_ms(const char *value, time_t now)
{
	if (!value)
		return -1;
	while (*value == ' ' || *value == '\t')
		value++;
	if (!*value)
		return -1;
	if (isdigit((unsigned char)*value)) {
		char *end;
		errno = 0;
		unsigned long long s = strtoull(value, &end, 10);
		while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
			end++;
		if (*end)
			return -1; /* "1.5" or "10s" are neither form */
		if (errno || s > (unsigned long long)(LONG_MAX / 1000))
			return LONG_MAX;
		return (long)s * 1000;
	}
	/* IMF-fixdate, RFC 850 and asctime: curl_getdate knows all three. A date in the past means
	 * "now". */
	time_t t = curl_getdate(value, NULL);
	if (t == (time_t)-1)
		return -1;
	if (t <= now)
		return 0;
	double ms = difftime(t, now) * 1000.0;
	return ms > (double)LONG_MAX ? LONG_MAX : (long)ms;
}

int kg_http_retryable(long status)
{
	return status == 408 || status == 409 || status == 429 || (status >= 500 && status <= 599);
}

long kg_backoff_ms(int attempt, long base_ms, long max_ms, uint32_t rnd)
{
	if (base_ms <= 0)
		return 0;
	if (max_ms < base_ms)
		max_ms = base_ms;
	long d = base_ms;
	for (int i = 0; i < attempt && d < max_ms; i++)
		d = d > max_ms / 2 ? max_ms : d * 2;
	if (d > max_ms)
		d = max_ms;
	long half = d / 2;
	return half + (long)((uint64_t)rnd % (uint64_t)(d - half + 1));
}
