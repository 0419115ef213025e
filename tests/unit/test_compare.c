/* Unit tests of the tolerance comparison and its NaN/Inf rules, and of the arena's canaries and
 * poison, which decide check.canary and check.unwritten_output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <unistd.h>
#include <string.h>

#include "verifier/arena.h"
#include "verifier/compare.h"
#include "verifier/dtype.h"

static void test_within_tolerance(void **state)
{
	(void)state;
	float exp[4] = {1.0f, -2.0f, 0.0f, 1000.0f};
	float got[4] = {1.0f + 1e-6f, -2.0f, 1e-7f, 1000.05f};
	struct kg_cmp r;
	assert_int_equal(kg_compare(got, exp, KG_F32, 4, 1e-6, 1e-4, &r), 0);
	assert_int_equal(r.n_bad, 0);
	assert_int_equal(r.max_abs_idx, 3);
}

static void test_mismatch_located(void **state)
{
	(void)state;
	float exp[6] = {0, 1, 2, 3, 4, 5};
	float got[6] = {0, 1, 2.5f, 3, 4, 9};
	struct kg_cmp r;
	assert_int_equal(kg_compare(got, exp, KG_F32, 6, 1e-3, 1e-3, &r), 1);
	assert_int_equal(r.n_bad, 2);
	assert_int_equal(r.first_bad, 2);
	assert_true(r.first_bad_got == 2.5 && r.first_bad_exp == 2.0);
	assert_int_equal(r.max_abs_idx, 5);
	assert_true(fabs(r.max_abs_err - 4.0) < 1e-12);
	char idx[64];
	int64_t shape[2] = {2, 3};
	kg_index_str(5, shape, 2, idx, sizeof(idx));
	assert_string_equal(idx, "[1, 2]");
}

static void test_nonfinite(void **state)
{
	(void)state;
	float exp[5] = {NAN, INFINITY, -INFINITY, 1.0f, 1.0f};
	float ok[5] = {NAN, INFINITY, -INFINITY, 1.0f, 1.0f};
	struct kg_cmp r;
	assert_int_equal(kg_compare(ok, exp, KG_F32, 5, 0, 0, &r), 0);
	/* NaN where a number is expected fails whatever the tolerance */
	float bad[5] = {NAN, INFINITY, -INFINITY, NAN, 1.0f};
	assert_int_equal(kg_compare(bad, exp, KG_F32, 5, 1e30, 1, &r), 1);
	assert_int_equal(r.n_nan, 1);
	assert_int_equal(r.first_nan, 3);
	/* a number where NaN is expected fails too, and so do swapped infinities */
	float bad2[5] = {0.0f, -INFINITY, -INFINITY, 1.0f, INFINITY};
	assert_int_equal(kg_compare(bad2, exp, KG_F32, 5, 1e30, 1, &r), 1);
	assert_int_equal(r.n_bad, 3);
	assert_int_equal(r.n_inf, 2);
}

static void test_half_precision(void **state)
{
	(void)state;
	uint16_t exp[2] = {kg_f32_to_f16(1.0f), kg_f32_to_f16(0.5f)};
	uint16_t got[2] = {kg_f32_to_f16(1.0009765625f), kg_f32_to_f16(0.5f)};
	struct kg_cmp r;
	assert_int_equal(kg_compare(got, exp, KG_F16, 2, 0, 1e-3, &r), 0);
	assert_int_equal(kg_compare(got, exp, KG_F16, 2, 0, 1e-4, &r), 1);
}

static void layout(struct kg_arena *a)
{
	kg_dtype dt[2] = {KG_F32, KG_F16};
	int nd[2] = {1, 2};
	int64_t shape[2][KG_MAX_DIMS] = {{10}, {3, 3}};
	kg_error e;
	assert_int_equal(kg_arena_layout(a, 1, 1, dt, nd, (const int64_t(*)[KG_MAX_DIMS])shape, &e), 0);
}

static void test_arena_canary(void **state)
{
	(void)state;
	struct kg_arena a;
	kg_error e;
	uint64_t sizes[2] = {40, 18};
	assert_int_equal(kg_arena_create(&a, kg_arena_size_for(sizes, 2), &e), 0);
	layout(&a);
	assert_int_equal(a.slot[0].off % KG_ARENA_ALIGN, 0);
	assert_int_equal(a.slot[1].off % KG_ARENA_ALIGN, 0);
	kg_arena_canary_fill(&a, 1234);
	int slot, side;
	uint64_t dist;
	assert_int_equal(kg_arena_canary_check(&a, &slot, &side, &dist), 0);
	/* writing the buffers themselves is fine */
	memset(kg_arena_ptr(&a, 0), 0xab, a.slot[0].bytes);
	memset(kg_arena_ptr(&a, 1), 0xcd, a.slot[1].bytes);
	assert_int_equal(kg_arena_canary_check(&a, &slot, &side, &dist), 0);
	/* one byte past the end of the f16 output */
	unsigned char *p = kg_arena_ptr(&a, 1);
	p[a.slot[1].bytes + 3] ^= 0x01;
	assert_int_equal(kg_arena_canary_check(&a, &slot, &side, &dist), 1);
	assert_int_equal(slot, 1);
	assert_int_equal(side, 1);
	assert_int_equal(dist, 3);
	p[a.slot[1].bytes + 3] ^= 0x01;
	/* one element before the input */
	float *in = kg_arena_ptr(&a, 0);
	in[-1] = 0.0f;
	assert_int_equal(kg_arena_canary_check(&a, &slot, &side, &dist), 1);
	assert_int_equal(slot, 0);
	assert_int_equal(side, -1);
	assert_true(dist < 4);
	kg_arena_destroy(&a);
}

static void test_arena_poison(void **state)
{
	(void)state;
	struct kg_arena a;
	kg_error e;
	uint64_t sizes[2] = {40, 18};
	assert_int_equal(kg_arena_create(&a, kg_arena_size_for(sizes, 2), &e), 0);
	layout(&a);
	kg_arena_poison(&a, 5);
	uint16_t *out = kg_arena_ptr(&a, 1);
	assert_true(isnan(kg_f16_to_f32(out[0])));
	uint16_t exp[9] = {0};
	assert_int_equal(kg_arena_unwritten(&a, 1, exp), 0);
	for (int i = 0; i < 8; i++)
		out[i] = kg_f32_to_f16(1.0f);
	assert_int_equal(kg_arena_unwritten(&a, 1, exp), 8);
	out[8] = 0;
	assert_int_equal(kg_arena_unwritten(&a, 1, exp), -1);
	/* a fresh poison differs from the last one */
	uint64_t old = a.slot[1].poison;
	kg_arena_poison(&a, 6);
	assert_true(a.slot[1].poison != old);
	/* the memfd is sealed: nobody can shrink it under the parent */
	assert_int_not_equal(ftruncate(a.fd, 0), 0);
	kg_arena_destroy(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_within_tolerance), cmocka_unit_test(test_mismatch_located),
		cmocka_unit_test(test_nonfinite),	 cmocka_unit_test(test_half_precision),
		cmocka_unit_test(test_arena_canary),	 cmocka_unit_test(test_arena_poison),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
