/* Unit tests of the tuner's core (plugins/tuner/tune.c): directives parsed and malformed ones
 * refused with file:line, labels and sources round-trip, the grid walk, deterministic random
 * sampling, successive halving around the best settings, and the example templates' spaces. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugins/tuner/tune.h"

static const char *tmpl = "/* a softmax template */\n"
			  "/* kgate:tune BLOCK = {128, 256, 512, 1024} */\n"
			  "// kgate:tune UNROLL={1,2,4}\n"
			  "  /*kgate:tune T = { float, double } */ int x;\n"
			  "int y = BLOCK * UNROLL;\n";

static void test_parse(void **state)
{
	(void)state;
	struct kg_tune_space s;
	kg_error e = {0};
	assert_int_equal(kg_tune_parse("dir/t.c", tmpl, &s, &e), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.name, "t.c");
	assert_false(s.cuda);
	assert_string_equal(s.p[0].name, "BLOCK");
	assert_int_equal(s.p[0].n, 4);
	assert_string_equal(s.p[0].values[3], "1024");
	assert_int_equal(s.p[0].line, 2);
	assert_string_equal(s.p[1].name, "UNROLL");
	assert_int_equal(s.p[1].line, 3);
	assert_string_equal(s.p[2].values[1], "double");
	assert_int_equal((int)s.size, 24);
	kg_tune_free(&s);
	assert_int_equal(kg_tune_parse("k.cu", "// kgate:tune V = {-1, 0x10, 1.5f}\n", &s, &e), 0);
	assert_true(s.cuda);
	assert_string_equal(s.p[0].values[0], "-1");
	assert_string_equal(s.p[0].values[2], "1.5f");
	kg_tune_free(&s);
}

/* Each malformed directive is an error that names the file and the line. */
static void test_malformed(void **state)
{
	(void)state;
	static const struct {
		const char *text, *want;
	} bad[] = {
		{"int a;\n/* kgate:tune B = {1, 2 */\n", "t.c:2: B: expected ',' or '}'"},
		{"/* kgate:tune B = {} */\n", "t.c:1: B has no values"},
		{"/* kgate:tune B {1} */\n", "t.c:1: expected '=' after B"},
		{"/* kgate:tune B = 1 */\n", "t.c:1: expected '{'"},
		{"/* kgate:tune 9B = {1} */\n", "t.c:1: expected a parameter name"},
		{"\n\n/* kgate:tune B = {1, 1} */\n", "t.c:3: B: value 1 listed twice"},
		{"/* kgate:tune B = {1}\n */\n", "t.c:1: B: expected '*/'"},
		{"// kgate:tune B = {1} extra\n", "t.c:1: B: unexpected text after '}'"},
		{"int kgate:tune;\n", "t.c:1: a kgate:tune directive must open a comment"},
		{"// kgate:tune A = {1}\n// kgate:tune A = {2}\n", "t.c:2: parameter A declared again (first at line 1)"},
		{"// kgate:tune A = {1, a-b}\n", "t.c:1: A: expected ',' or '}'"},
		{"// kgate:tune A = {1, \"x\"}\n", "t.c:1: A: expected a value"},
		{"// kgate:tuneA = {1}\n", "t.c:1: expected 'kgate:tune NAME"},
		{"int main;\n", "t.c: no kgate:tune directive"},
		{"/* kgate:tuned A=1 */\n#define A 1\n", "t.c:1: this is a candidate the tuner generated"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kg_tune_space s;
		kg_error e = {0};
		int rc = kg_tune_parse("t.c", bad[i].text, &s, &e);
		if (rc != -EINVAL || !strstr(e.msg, bad[i].want))
			fail_msg("case %zu: rc %d, message '%s', wanted '%s'", i, rc, e.msg, bad[i].want);
		kg_tune_free(&s);
	}
	struct kg_tune_space s;
	kg_error e = {0};
	assert_int_equal(kg_tune_parse("t.py", "# kgate:tune A = {1}\n", &s, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "a .c (CPU) or .cu (CUDA) file"));
	kg_tune_free(&s);
}

static void test_label_and_source(void **state)
{
	(void)state;
	struct kg_tune_space s;
	kg_error e = {0};
	assert_int_equal(kg_tune_parse("t.c", tmpl, &s, &e), 0);
	kg_tune_point pt = {{2, 1, 1}}, back;
	kg_buf b = {0};
	assert_int_equal(kg_tune_label(&s, &pt, &b), 0);
	assert_string_equal(kg_buf_str(&b), "BLOCK=512 UNROLL=2 T=double");
	assert_int_equal(kg_tune_parse_label(&s, kg_buf_str(&b), &back), 0);
	assert_memory_equal(back.ix, pt.ix, 3);
	assert_int_equal(kg_tune_parse_label(&s, "BLOCK=512 UNROLL=2", &back), -ENOENT); /* T missing */
	assert_int_equal(kg_tune_parse_label(&s, "BLOCK=64 UNROLL=2 T=double", &back), -ENOENT);
	assert_int_equal(kg_tune_parse_label(&s, "honest.c", &back), -ENOENT);
	kg_buf_free(&b);
	assert_int_equal(kg_tune_source(&s, &pt, &b), 0);
	const char *src = kg_buf_str(&b);
	assert_non_null(strstr(src, "#define BLOCK 512\n#define UNROLL 2\n#define T double\n#line 1 \"t.c\"\n"));
	assert_non_null(strstr(src, "int y = BLOCK * UNROLL;\n"));
	char label[256];
	assert_int_equal(kg_tune_source_label(src, label, sizeof(label)), 0);
	assert_string_equal(label, "BLOCK=512 UNROLL=2 T=double");
	assert_int_equal(kg_tune_source_label(tmpl, label, sizeof(label)), -ENOENT);
	/* a generated candidate is refused as a template */
	struct kg_tune_space s2;
	assert_int_equal(kg_tune_parse("g.c", src, &s2, &e), -EINVAL);
	kg_tune_free(&s2);
	kg_buf_free(&b);
	kg_tune_free(&s);
}

static int count_distinct(const struct kg_tune_space *s, const kg_tune_point *p, int n)
{
	int d = 0;
	for (int i = 0; i < n; i++) {
		int dup = 0;
		for (int j = 0; j < i && !dup; j++)
			dup = !memcmp(p[i].ix, p[j].ix, (size_t)s->n);
		d += !dup;
	}
	return d;
}

/* A space within the whole budget is walked as a grid, round after round, never repeating. */
static void test_grid(void **state)
{
	(void)state;
	struct kg_tune_space s;
	kg_error e = {0};
	assert_int_equal(kg_tune_parse("t.c", tmpl, &s, &e), 0); /* 24 settings */
	struct kg_tune_plan plan = {.seed = 1, .round = 1, .rounds_total = 3, .budget = 10, .eta = 2, .grid_max = 4096};
	kg_tune_point seen[64], out[16];
	int n_seen = 0, grid = 0;
	for (int round = 1; round <= 3; round++) {
		plan.round = round;
		int n = kg_tune_next(&s, &plan, seen, n_seen, NULL, 0, out, 16, &grid);
		assert_true(grid);
		assert_int_equal(n, round < 3 ? 10 : 4);
		memcpy(&seen[n_seen], out, (size_t)n * sizeof(*out));
		n_seen += n;
	}
	assert_int_equal(count_distinct(&s, seen, n_seen), 24);
	plan.round = 4;
	assert_int_equal(kg_tune_next(&s, &plan, seen, n_seen, NULL, 0, out, 16, &grid), 0); /* exhausted */
	/* the same space, too large for the budget: sampled instead */
	plan.rounds_total = 1;
	assert_int_equal(kg_tune_next(&s, &plan, NULL, 0, NULL, 0, out, 16, &grid), 10);
	assert_false(grid);
	kg_tune_free(&s);
}

static const char *big = "// kgate:tune A = {0,1,2,3,4,5,6,7,8,9}\n// kgate:tune B = {0,1,2,3,4,5,6,7,8,9}\n"
			 "// kgate:tune C = {0,1,2,3,4,5,6,7,8,9}\n";

/* Random samples: distinct, new, and the same for the same seed. */
static void test_random_deterministic(void **state)
{
	(void)state;
	struct kg_tune_space s;
	kg_error e = {0};
	assert_int_equal(kg_tune_parse("t.c", big, &s, &e), 0);
	struct kg_tune_plan plan = {.seed = 42, .round = 1, .rounds_total = 3, .budget = 8, .eta = 2, .grid_max = 4096};
	kg_tune_point a[8], b[8], c[8];
	int grid;
	assert_int_equal(kg_tune_next(&s, &plan, NULL, 0, NULL, 0, a, 8, &grid), 8);
	assert_false(grid);
	assert_int_equal(kg_tune_next(&s, &plan, NULL, 0, NULL, 0, b, 8, &grid), 8);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(count_distinct(&s, a, 8), 8);
	plan.seed = 43;
	assert_int_equal(kg_tune_next(&s, &plan, NULL, 0, NULL, 0, c, 8, &grid), 8);
	assert_true(memcmp(a, c, sizeof(a)) != 0);
	/* nothing already verified comes back */
	plan.seed = 42;
	assert_int_equal(kg_tune_next(&s, &plan, a, 4, NULL, 0, b, 8, &grid), 8);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			assert_true(memcmp(b[i].ix, a[j].ix, 3) != 0);
	kg_tune_free(&s);
}

/* Round 2 explores around the best setting so far (one step along one parameter); later rounds
 * keep fewer survivors. */
static void test_halving(void **state)
{
	(void)state;
	struct kg_tune_space s;
	kg_error e = {0};
	assert_int_equal(kg_tune_parse("t.c", big, &s, &e), 0);
	struct kg_tune_result r[3] = {
		{.pt = {{5, 5, 5}}, .speedup = 3.0},
		{.pt = {{1, 1, 1}}, .speedup = 1.0},
		{.pt = {{9, 0, 0}}, .speedup = 0.5},
	};
	kg_tune_point seen[3] = {r[0].pt, r[1].pt, r[2].pt}, out[8];
	struct kg_tune_plan plan = {.seed = 7, .round = 3, .rounds_total = 4, .budget = 6, .eta = 2, .grid_max = 16};
	int grid;
	/* round 3 with budget 6: ceil(6/2)=3, ceil(3/2)=2 survivors; the first proposals are the best
	 * one's neighbours */
	int n = kg_tune_next(&s, &plan, seen, 3, r, 3, out, 8, &grid);
	assert_int_equal(n, 6);
	assert_false(grid);
	const kg_tune_point want0 = {{6, 5, 5}}, want1 = {{2, 1, 1}};
	assert_memory_equal(out[0].ix, want0.ix, 3);
	assert_memory_equal(out[1].ix, want1.ix, 3);
	for (int i = 0; i < n; i++) {
		int d = 0;
		for (int p = 0; p < 3; p++)
			d += abs(out[i].ix[p] - r[0].pt.ix[p]);
		int d2 = 0;
		for (int p = 0; p < 3; p++)
			d2 += abs(out[i].ix[p] - r[1].pt.ix[p]);
		assert_true(d == 1 || d2 == 1); /* every proposal is next to one of the two survivors */
	}
	/* a late round keeps only the best */
	plan.round = 6;
	n = kg_tune_next(&s, &plan, seen, 3, r, 3, out, 8, &grid);
	for (int i = 0; i < 6 && i < n; i++) {
		int d = 0;
		for (int p = 0; p < 3; p++)
			d += abs(out[i].ix[p] - r[0].pt.ix[p]);
		assert_true(d == 1);
	}
	kg_tune_free(&s);
}

/* The shipped example templates parse (their spaces are what the CUDA compile test walks). */
static void test_examples(void **state)
{
	(void)state;
	static const char *const files[] = {
		"examples/tuner/softmax.c", "examples/tuner/matmul.c", "examples/tuner/softmax.cu",
		"examples/tuner/matmul.cu", "examples/tuner/layernorm.cu", "examples/tuner/conv_relu_pool.cu",
	};
	const char *home = getenv("KGATE_HOME");
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", home ? home : ".", files[i]);
		struct kg_tune_space s;
		kg_error e = {0};
		if (kg_tune_load(path, &s, &e))
			fail_msg("%s", e.msg);
		assert_true(s.n >= 2);
		assert_true(s.size >= 4);
		kg_tune_free(&s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_label_and_source),
		cmocka_unit_test(test_grid),
		cmocka_unit_test(test_random_deterministic),
		cmocka_unit_test(test_halving),
		cmocka_unit_test(test_examples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
