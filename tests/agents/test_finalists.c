/* Unit tests of the finalists' statistics (agents/finalists.c): the order-statistics interval of
 * a median and its coverage, and the decision: a significant winner only when its interval clears
 * the others', otherwise "no significant difference" and the earliest of the tied is kept,
 * whatever order the samples arrived in; disqualified and unmeasured finalists never win. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agents/finalists.h"

static void test_interval(void **state)
{
	(void)state;
	struct kg_interval ci;
	double five[] = {2.0, 1.0, 5.0, 3.0, 4.0};
	kg_median_interval(five, 5, 0.9, &ci);
	assert_int_equal(ci.n, 5);
	assert_true(ci.median == 3.0);
	assert_true(ci.lo == 1.0 && ci.hi == 5.0); /* n = 5: only the range reaches 90% */
	assert_true(ci.coverage > 0.937 && ci.coverage < 0.938); /* 1 - 2/32 */
	double ten[10];
	for (int i = 0; i < 10; i++)
		ten[i] = 10 - i;
	kg_median_interval(ten, 10, 0.9, &ci);
	assert_true(ci.median == 5.5);
	assert_true(ci.lo == 2.0 && ci.hi == 9.0); /* k = 2: 1 - 2*11/1024 = 0.979; k = 3 is 0.891 */
	assert_true(ci.coverage > 0.978 && ci.coverage < 0.979);
	double one[] = {1.5};
	kg_median_interval(one, 1, 0.9, &ci);
	assert_true(ci.lo == 1.5 && ci.hi == 1.5 && ci.coverage == 0);
	kg_median_interval(one, 0, 0.9, &ci);
	assert_int_equal(ci.n, 0);
}

static struct kg_finalist fin(const char *id, int order, const double *x, int n)
{
	struct kg_finalist f;
	memset(&f, 0, sizeof(f));
	strcpy(f.id, id);
	f.order = order;
	f.n = n;
	if (n > 0)
		memcpy(f.samples, x, (size_t)n * sizeof(double));
	return f;
}

/* Eight copies of one kernel once scored 1.29x to 1.93x: samples like those overlap, so no copy
 * is declared faster, and the same one (the earliest) wins whichever measured fastest. */
static void test_overlap_is_no_difference(void **state)
{
	(void)state;
	const double a[] = {1.29, 1.61, 1.93, 1.45, 1.70}, b[] = {1.50, 1.88, 1.33, 1.77, 1.62},
		     c[] = {1.40, 1.55, 1.91, 1.36, 1.81};
	struct kg_finalist f[3] = {fin("b", 5, b, 5), fin("a", 2, a, 5), fin("c", 9, c, 5)};
	struct kg_decision d;
	kg_finalists_decide(f, 3, 0.9, &d);
	assert_false(d.significant);
	assert_int_equal(d.winner, 1); /* "a": the earliest in the history */
	assert_int_equal(d.n_tied, 2);
	assert_true(d.faster_than_reference); /* every sample above 1 */
	/* the interval is reported */
	assert_true(f[1].ci.lo == 1.29 && f[1].ci.hi == 1.93);
	/* the same decision with the finalists in another order */
	struct kg_finalist g[3] = {f[2], f[0], f[1]};
	kg_finalists_decide(g, 3, 0.9, &d);
	assert_string_equal(g[d.winner].id, "a");
}

static void test_significant(void **state)
{
	(void)state;
	const double fast[] = {2.5, 2.6, 2.4, 2.7, 2.55}, slow[] = {1.2, 1.3, 1.25, 1.1, 1.4};
	struct kg_finalist f[2] = {fin("slow", 0, slow, 5), fin("fast", 3, fast, 5)};
	struct kg_decision d;
	kg_finalists_decide(f, 2, 0.9, &d);
	assert_true(d.significant);
	assert_int_equal(d.winner, 1);
	assert_int_equal(d.n_tied, 0);
	assert_true(d.faster_than_reference);
	/* an interval reaching below 1 is not faster than the reference */
	const double near1[] = {0.95, 1.2, 1.1, 1.05, 1.3};
	struct kg_finalist h[1] = {fin("x", 0, near1, 5)};
	kg_finalists_decide(h, 1, 0.9, &d);
	assert_int_equal(d.winner, 0);
	assert_true(d.significant);
	assert_false(d.faster_than_reference);
}

static void test_disqualified(void **state)
{
	(void)state;
	const double fast[] = {3.0, 3.1, 3.2}, slow[] = {1.2, 1.3, 1.25};
	struct kg_finalist f[3] = {fin("cheat", 0, fast, 3), fin("honest", 1, slow, 3), fin("none", 2, NULL, 0)};
	f[0].disqualified = 1;
	struct kg_decision d;
	kg_finalists_decide(f, 3, 0.9, &d);
	assert_int_equal(d.winner, 1);
	assert_int_equal(d.n_tied, 0);
	/* nothing measured at all: no winner from re-timing */
	struct kg_finalist g[1] = {fin("none", 0, NULL, 0)};
	kg_finalists_decide(g, 1, 0.9, &d);
	assert_int_equal(d.winner, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interval),
		cmocka_unit_test(test_overlap_is_no_difference),
		cmocka_unit_test(test_significant),
		cmocka_unit_test(test_disqualified),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
