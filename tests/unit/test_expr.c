/* Unit tests of the manifest expression evaluator: arithmetic, names, and every error path
 * (manifests are user input). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "verifier/plan/expr.h"

static int64_t eval_ok(const char *s, const kg_dims *d)
{
	int64_t v = -12345;
	char err[256];
	assert_int_equal(kg_expr_eval(s, d, &v, err, sizeof(err)), 0);
	return v;
}

static void test_arithmetic(void **state)
{
	(void)state;
	kg_dims d = {0};
	kg_dims_set(&d, "H", 32);
	kg_dims_set(&d, "R", 5);
	assert_int_equal(eval_ok("1+2*3", &d), 7);
	assert_int_equal(eval_ok("(H-R+1)/2", &d), 14);
	assert_int_equal(eval_ok(" - 3 + H % 5", &d), -1);
	assert_int_equal(eval_ok("min(H, R) * max(2, 3)", &d), 15);
	assert_int_equal(eval_ok("2*H*H*H", &d), 65536);
}

static void test_errors(void **state)
{
	(void)state;
	kg_dims d = {0};
	kg_dims_set(&d, "N", 0);
	int64_t v;
	char err[256];
	assert_int_equal(kg_expr_eval("N + M", &d, &v, err, sizeof(err)), -22);
	assert_non_null(strstr(err, "unknown dimension 'M'"));
	assert_int_equal(kg_expr_eval("4/N", &d, &v, err, sizeof(err)), -33);
	assert_int_equal(kg_expr_eval("99999999999*99999999999", &d, &v, err, sizeof(err)), -34);
	assert_int_equal(kg_expr_eval("(1+2", &d, &v, err, sizeof(err)), -22);
	assert_int_equal(kg_expr_eval("1 2", &d, &v, err, sizeof(err)), -22);
	assert_int_equal(kg_expr_eval("", &d, &v, err, sizeof(err)), -22);
	assert_int_equal(kg_expr_eval("99999999999999999999", &d, &v, err, sizeof(err)), -34);
	/* nesting bound: no stack exhaustion on hostile input */
	char deep[400];
	memset(deep, '(', 300);
	deep[300] = '1';
	deep[301] = '\0';
	assert_int_equal(kg_expr_eval(deep, &d, &v, err, sizeof(err)), -22);
}

static void test_dims(void **state)
{
	(void)state;
	kg_dims d = {0};
	int64_t v;
	assert_int_equal(kg_dims_set(&d, "9x", 1), -22);
	assert_int_equal(kg_dims_set(&d, "A", 1), 0);
	assert_int_equal(kg_dims_set(&d, "A", 7), 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(kg_dims_get(&d, "A", &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(kg_dims_get(&d, "B", &v), -2);
	char name[4] = "D0";
	for (int i = 1; i < KG_MAX_SYMS; i++) {
		name[1] = (char)('a' + i);
		assert_int_equal(kg_dims_set(&d, name, i), 0);
	}
	assert_int_equal(kg_dims_set(&d, "Z", 1), -28);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arithmetic),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_dims),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
