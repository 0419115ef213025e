/* Unit tests of the seeded generators: determinism, independence of derived streams, rough
 * distribution moments, and that input classes produce what they promise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/dtype.h"
#include "verifier/inputs.h"
#include "verifier/prng.h"

static void test_deterministic(void **state)
{
	(void)state;
	kg_prng a, b;
	kg_prng_seed(&a, 42);
	kg_prng_seed(&b, 42);
	for (int i = 0; i < 1000; i++)
		assert_true(kg_prng_next(&a) == kg_prng_next(&b));
	kg_prng_seed(&b, 43);
	int same = 0;
	for (int i = 0; i < 1000; i++)
		same += kg_prng_next(&a) == kg_prng_next(&b);
	assert_int_equal(same, 0);
	assert_true(kg_seed_derive(1, 1) != kg_seed_derive(1, 2));
	assert_true(kg_seed_derive(1, 1) != kg_seed_derive(2, 1));
}

static void test_moments(void **state)
{
	(void)state;
	kg_prng r;
	kg_prng_seed(&r, 7);
	double s = 0, s2 = 0, us = 0;
	const int n = 200000;
	for (int i = 0; i < n; i++) {
		double x = kg_prng_normal(&r);
		s += x;
		s2 += x * x;
		double u = kg_prng_uniform(&r);
		assert_true(u >= 0 && u < 1);
		us += u;
	}
	assert_true(fabs(s / n) < 0.01);
	assert_true(fabs(s2 / n - 1.0) < 0.02);
	assert_true(fabs(us / n - 0.5) < 0.01);
	for (int i = 0; i < 1000; i++)
		assert_true(kg_prng_below(&r, 3) < 3);
}

static void test_fresh_seed(void **state)
{
	(void)state;
	uint64_t a = 0, b = 0;
	assert_int_equal(kg_seed_fresh(&a), 0);
	assert_int_equal(kg_seed_fresh(&b), 0);
	assert_true(a != b);
}

/* Filling is independent of how many threads did it: the result depends on the seed only. */
static void test_fill_classes(void **state)
{
	(void)state;
	const size_t n = 3u << 20; /* three chunks */
	int64_t shape[2] = {3 << 10, 1 << 10};
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 99);
	kg_inputs_fill(b, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 99);
	assert_memory_equal(a, b, n * sizeof(float));
	kg_inputs_fill(b, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 100);
	assert_memory_not_equal(a, b, n * sizeof(float));

	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NEGATIVE, 1);
	for (size_t i = 0; i < n; i++)
		assert_true(a[i] < 0);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_ZEROS, 1);
	for (size_t i = 0; i < n; i++)
		assert_true(a[i] == 0);
	/* weights never take the degenerate classes */
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_WEIGHT, KG_CLASS_ZEROS, 1);
	int nonzero = 0;
	for (size_t i = 0; i < n; i++)
		nonzero += a[i] != 0;
	assert_true(nonzero > (int)(n / 2));
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_SORTED, 1);
	for (size_t i = 1; i < n; i++)
		if (i % (size_t)shape[1])
			assert_true(a[i] > a[i - 1]);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_TINY, 1);
	int denormal = 0;
	for (size_t i = 0; i < n; i++) {
		assert_true(fabsf(a[i]) < 1e-25f);
		denormal += a[i] != 0 && fpclassify(a[i]) == FP_SUBNORMAL;
	}
	assert_true(denormal > 1000);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_SPECIAL, 1);
	int nans = 0, infs = 0;
	for (size_t i = 0; i < n; i++) {
		nans += isnan(a[i]);
		infs += isinf(a[i]) != 0;
	}
	assert_true(nans > 1000 && infs > 2000);
	free(a);
	free(b);
}

static void test_identity(void **state)
{
	(void)state;
	int64_t shape[2] = {5, 5};
	float m[25];
	kg_inputs_fill(m, KG_F32, 25, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_IDENTITY, 3);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++)
			assert_true(m[i * 5 + j] == (i == j ? 1.0f : 0.0f));
}

static void test_half_conversions(void **state)
{
	(void)state;
	assert_int_equal(kg_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(kg_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(kg_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(kg_f32_to_f16(1e6f), 0x7c00);
	assert_true(kg_f16_to_f32(0x0001) == 5.9604644775390625e-08f);
	assert_true(isnan(kg_f16_to_f32(kg_f32_to_f16(NAN))));
	for (uint32_t h = 0; h < 0x7c00; h++)
		assert_int_equal(kg_f32_to_f16(kg_f16_to_f32((uint16_t)h)), h);
	assert_int_equal(kg_f32_to_bf16(1.0f), 0x3f80);
	assert_true(kg_bf16_to_f32(0x3f80) == 1.0f);
	assert_true(isnan(kg_bf16_to_f32(kg_f32_to_bf16(NAN))));
	/* round to nearest even: 1 + 2^-8 is halfway between two bf16 values */
	assert_int_equal(kg_f32_to_bf16(1.00390625f), 0x3f80);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deterministic), cmocka_unit_test(test_moments),
		cmocka_unit_test(test_fresh_seed),    cmocka_unit_test(test_fill_classes),
		cmocka_unit_test(test_identity),      cmocka_unit_test(test_half_conversions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
