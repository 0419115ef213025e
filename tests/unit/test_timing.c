/* Timing statistics and the tamper bound: the runner's claims against the parent's clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "verifier/timing.h"

static void test_stats(void **state)
{
	(void)state;
	double ms[10] = {5, 1, 2, 3, 4, 6, 7, 8, 9, 10};
	struct kg_timing t;
	kg_timing_stats(ms, 10, &t);
	assert_int_equal(t.n, 10);
	assert_float_equal(t.median_ms, 5.5, 1e-12);
	assert_float_equal(t.min_ms, 1, 0);
	assert_float_equal(t.max_ms, 10, 0);
	assert_float_equal(t.p10_ms, 1, 0);
	assert_float_equal(t.p90_ms, 10, 0);
	assert_float_equal(t.spread, 9 / 5.5, 1e-12);
	double one = 2;
	kg_timing_stats(&one, 1, &t);
	assert_float_equal(t.median_ms, 2, 0);
	assert_float_equal(t.spread, 0, 0);
	kg_timing_stats(NULL, 0, &t);
	assert_int_equal(t.n, 0);
}

static void test_tamper(void **state)
{
	(void)state;
	struct kg_timed_call c[3];
	struct kg_tamper t;
	/* honest: the claim explains the span up to the overhead */
	for (int i = 0; i < 3; i++)
		c[i] = (struct kg_timed_call){.child_ns = 10000000, .parent_ns = 10100000, .span_ns = 10300000};
	kg_timing_tamper(c, 3, 200000, &t);
	assert_int_equal(t.impossible, -1);
	assert_true(t.min_hidden_share < KG_TAMPER_HIDDEN_SHARE);
	/* a claim longer than the parent's round trip cannot be */
	c[1].child_ns = 20000000;
	kg_timing_tamper(c, 3, 200000, &t);
	assert_int_equal(t.impossible, 1);
	/* work hidden after the claimed stop in every call */
	for (int i = 0; i < 3; i++)
		c[i] = (struct kg_timed_call){.child_ns = 100000, .parent_ns = 50000000, .span_ns = 50200000};
	kg_timing_tamper(c, 3, 200000, &t);
	assert_true(t.min_hidden_share > KG_TAMPER_HIDDEN_SHARE);
	/* ...but one call without the gap (scheduling noise elsewhere) keeps the bound quiet */
	c[2] = (struct kg_timed_call){.child_ns = 49000000, .parent_ns = 49100000, .span_ns = 49300000};
	kg_timing_tamper(c, 3, 200000, &t);
	assert_true(t.min_hidden_share < KG_TAMPER_HIDDEN_SHARE);
	/* under a millisecond of gap is never called hidden work */
	c[0] = (struct kg_timed_call){.child_ns = 10000, .parent_ns = 900000, .span_ns = 900000};
	kg_timing_tamper(c, 1, 0, &t);
	assert_float_equal(t.min_hidden_share, 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_tamper),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
