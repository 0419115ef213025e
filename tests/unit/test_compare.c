/* Unit tests of the tolerance model and comparison (its NaN/Inf rules, the norm-wise error, the
 * growth term against real fp32 rounding noise and against the shortcuts it must still catch),
 * of the arena's canaries and poison, which decide check.canary and check.unwritten_output, and of
 * device/judge.h, the same rules as kgate-device runs them on the GPU: the same verdict, indices
 * and maxima as kg_compare's, the sums to rounding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <unistd.h>
#include <string.h>

#include <stdlib.h>

#include "device/judge.h"
#include "verifier/arena/arena.h"
#include "verifier/judge/compare.h"
#include "verifier/plan/dtype.h"

static void test_within_tolerance(void **state)
{
	(void)state;
	float exp[4] = {1.0f, -2.0f, 0.0f, 1000.0f};
	float got[4] = {1.0f + 1e-6f, -2.0f, 1e-7f, 1000.05f};
	struct kg_cmp r;
	assert_int_equal(kg_compare(got, exp, KG_F32, 4, &(struct kg_tol){.atol = 1e-6, .rtol = 1e-4}, &r), 0);
	assert_int_equal(r.n_bad, 0);
	assert_int_equal(r.max_abs_idx, 3);
}

static void test_mismatch_located(void **state)
{
	(void)state;
	float exp[6] = {0, 1, 2, 3, 4, 5};
	float got[6] = {0, 1, 2.5f, 3, 4, 9};
	struct kg_cmp r;
	assert_int_equal(kg_compare(got, exp, KG_F32, 6, &(struct kg_tol){.atol = 1e-3, .rtol = 1e-3}, &r), 1);
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
	assert_int_equal(kg_compare(ok, exp, KG_F32, 5, &(struct kg_tol){0}, &r), 0);
	/* NaN where a number is expected fails whatever the tolerance */
	float bad[5] = {NAN, INFINITY, -INFINITY, NAN, 1.0f};
	assert_int_equal(kg_compare(bad, exp, KG_F32, 5, &(struct kg_tol){.atol = 1e30, .rtol = 1}, &r), 1);
	assert_int_equal(r.n_nan, 1);
	assert_int_equal(r.first_nan, 3);
	/* a number where NaN is expected fails too, and so do swapped infinities */
	float bad2[5] = {0.0f, -INFINITY, -INFINITY, 1.0f, INFINITY};
	assert_int_equal(kg_compare(bad2, exp, KG_F32, 5, &(struct kg_tol){.atol = 1e30, .rtol = 1}, &r), 1);
	assert_int_equal(r.n_bad, 3);
	assert_int_equal(r.n_inf, 2);
	/* a non-finite mismatch makes the norm-wise error infinite, never small */
	assert_true(isinf(r.normwise_err) && isinf(r.tol_used));
}

static void test_half_precision(void **state)
{
	(void)state;
	uint16_t exp[2] = {kg_f32_to_f16(1.0f), kg_f32_to_f16(0.5f)};
	uint16_t got[2] = {kg_f32_to_f16(1.0009765625f), kg_f32_to_f16(0.5f)};
	struct kg_cmp r;
	assert_int_equal(kg_compare(got, exp, KG_F16, 2, &(struct kg_tol){.rtol = 1e-3}, &r), 0);
	assert_int_equal(kg_compare(got, exp, KG_F16, 2, &(struct kg_tol){.rtol = 1e-4}, &r), 1);
}

/* The shipped default policy's model for an fp32 output: growth 1/4 of n*u, capped at 2^-10. */
static struct kg_tol_model fp32_model(double atol, double rtol, double rms)
{
	return (struct kg_tol_model){.atol = atol, .rtol = rtol, .rms = rms, .growth = 0.25, .cap = 1.0 / 1024};
}

static void test_growth_term(void **state)
{
	(void)state;
	struct kg_tol_model m = fp32_model(1e-9, 2e-5, 0);
	/* no reduction, no growth; integers are exact */
	assert_true(kg_tol_growth(&m, KG_F32, 1) == 0);
	assert_true(kg_tol_growth(&m, KG_I32, 1 << 20) == 0);
	/* growth*n*u: 1/4 * 4096 * 2^-24 = 2^-14 for a 4096-term dot product */
	assert_true(kg_tol_growth(&m, KG_F32, 4096) == 1.0 / 16384);
	/* 65536 terms reach the cap exactly; a longer reduction gets no more */
	assert_true(kg_tol_growth(&m, KG_F32, 65536) == 1.0 / 1024);
	assert_true(kg_tol_growth(&m, KG_F32, 64 * 256 * 256) == 1.0 / 1024);
	/* growth 0 is the old fixed tolerance */
	struct kg_tol_model off = m;
	off.growth = 0;
	assert_true(kg_tol_growth(&off, KG_F32, 65536) == 0);
	/* resolved: rtol gains g, atol gains (rms + g) times the reference's RMS */
	struct kg_tol t;
	m.rms = 1e-6;
	kg_tol_resolve(&m, KG_F32, 4096, 2.0, &t);
	assert_float_equal(t.growth, 1.0 / 16384, 0);
	assert_float_equal(t.rtol, 2e-5 + 1.0 / 16384, 1e-18);
	assert_float_equal(t.atol, 1e-9 + (1e-6 + 1.0 / 16384) * 2.0, 1e-18);
	float v[4] = {3, -4, NAN, INFINITY}; /* RMS over the finite elements only */
	assert_float_equal(kg_rms(v, KG_F32, 4), sqrt(12.5), 1e-12);
	assert_true(kg_rms(v + 2, KG_F32, 2) == 0);
}

static void test_normwise_and_share(void **state)
{
	(void)state;
	float exp[3] = {3, 4, 0}, got[3] = {3, 4.5f, 0};
	struct kg_cmp r;
	assert_int_equal(kg_compare(got, exp, KG_F32, 3, &(struct kg_tol){.atol = 1, .rtol = 0}, &r), 0);
	assert_float_equal(r.normwise_err, 0.5 / 5, 1e-12);
	assert_float_equal(r.tol_used, 0.5, 1e-12);
	assert_int_equal(r.tol_used_idx, 1);
	/* a zero output against a non-zero reference is 100 % off, norm-wise too */
	float zero[3] = {0};
	assert_int_equal(kg_compare(zero, exp, KG_F32, 3, &(struct kg_tol){.atol = 1e-3, .rtol = 1e-3}, &r), 1);
	assert_float_equal(r.normwise_err, 1.0, 1e-12);
	assert_true(r.tol_used > 1);
	/* an error under a zero tolerance uses all of it and more */
	assert_int_equal(kg_compare(got, exp, KG_F32, 3, &(struct kg_tol){0}, &r), 1);
	assert_true(isinf(r.tol_used));
	/* both norms zero: no error */
	assert_int_equal(kg_compare(zero, zero, KG_F32, 3, &(struct kg_tol){0}, &r), 0);
	assert_true(r.normwise_err == 0);
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double unif(uint64_t *s)
{
	return (double)(rng(s) >> 11) / 9007199254740992.0;
}

/* Softmax over one row of C values, as examples/softmax/online.c computes it in fp32 (one pass
 * for max and sum, rescaling at every new max) and as the trusted reference does (double, rounded
 * once). Ascending values rescale at every element; wide normal values (std 4) leave the running
 * sum far above most terms, which then round away: both errors are systematic, ~1e-4. */
#define C 65536
static void softmax_pair(float *fp32, float *ref, int wide)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	float *x = malloc(C * sizeof(float));
	assert_non_null(x);
	for (int c = 0; c < C; c++)
		x[c] = wide ? (float)(4 * sqrt(-2 * log(unif(&s) + 1e-300)) * cos(6.283185307179586 * unif(&s)))
			    : (float)(-1.0 + (2.0 * c + unif(&s)) / C);
	float m = -INFINITY, sum = 0;
	for (int c = 0; c < C; c++) {
		if (x[c] > m) {
			sum *= expf(m - x[c]);
			m = x[c];
		}
		sum += expf(x[c] - m);
	}
	for (int c = 0; c < C; c++)
		fp32[c] = expf(x[c] - m) * (1.0f / sum);
	double dm = m, ds = 0; /* the max is exact in either precision */
	for (int c = 0; c < C; c++)
		ds += exp((double)x[c] - dm);
	for (int c = 0; c < C; c++)
		ref[c] = (float)(exp((double)x[c] - dm) / ds);
	free(x);
}

static float keep_bits(float f, int mantissa_bits) /* truncation toward zero */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u &= ~((1u << (23 - mantissa_bits)) - 1);
	memcpy(&f, &u, 4);
	return f;
}

static void test_long_sum_noise_passes(void **state)
{
	(void)state;
	float *got = malloc(C * sizeof(float)), *ref = malloc(C * sizeof(float));
	assert_non_null(got);
	assert_non_null(ref);
	for (int wide = 0; wide < 2; wide++) {
		softmax_pair(got, ref, wide);
		struct kg_cmp r;
		/* the softmax task's own bounds (atol 1e-9, rtol 2e-5) reject honest fp32 at C = 65536:
		 * the row's sum is off by ~1e-4, and with it every element of the row */
		const struct kg_tol_model m = fp32_model(1e-9, 2e-5, 0);
		struct kg_tol fixed = {.atol = 1e-9, .rtol = 2e-5}, t;
		assert_int_equal(kg_compare(got, ref, KG_F32, C, &fixed, &r), 1);
		assert_true(r.max_rel_err > 4e-5 && r.max_rel_err < 4e-4);
		assert_true(r.normwise_err > 2e-5 && r.normwise_err < 4e-4);
		/* the growth term for a 65536-term reduction admits it, with room */
		kg_tol_resolve(&m, KG_F32, C, kg_rms(ref, KG_F32, C), &t);
		assert_int_equal(kg_compare(got, ref, KG_F32, C, &t, &r), 0);
		assert_true(r.tol_used < 0.3);
	}
	free(got);
	free(ref);
}

static void test_dot_product_noise_passes(void **state)
{
	(void)state;
	/* 64 outputs, each a 4096-term dot product of random-signed values summed in fp32, against
	 * the double sum: the errors near cancelling outputs are absolute, covered by the RMS term */
	enum { K = 4096, M = 64 };
	float got[M], ref[M];
	uint64_t s = 42;
	for (int i = 0; i < M; i++) {
		float acc = 0;
		double dacc = 0;
		for (int k = 0; k < K; k++) {
			float a = (float)(2 * unif(&s) - 1) * 3, b = (float)(2 * unif(&s) - 1);
			acc += a * b;
			dacc += (double)a * b;
		}
		got[i] = acc;
		ref[i] = (float)dacc;
	}
	const struct kg_tol_model m = fp32_model(1e-5, 1e-4, 1e-5); /* the matmul task's bounds */
	struct kg_tol t;
	struct kg_cmp r;
	kg_tol_resolve(&m, KG_F32, K, kg_rms(ref, KG_F32, M), &t);
	assert_int_equal(kg_compare(got, ref, KG_F32, M, &t, &r), 0);
	assert_true(r.tol_used < 0.5);
}

static void test_shortcuts_still_fail(void **state)
{
	(void)state;
	float *good = malloc(C * sizeof(float)), *ref = malloc(C * sizeof(float)), *bad = malloc(C * sizeof(float));
	assert_non_null(good);
	assert_non_null(ref);
	assert_non_null(bad);
	softmax_pair(good, ref, 0);
	const struct kg_tol_model m = fp32_model(1e-9, 2e-5, 0);
	struct kg_tol t;
	struct kg_cmp r;
	kg_tol_resolve(&m, KG_F32, C, kg_rms(ref, KG_F32, C), &t);
	/* all zeros */
	memset(bad, 0, C * sizeof(float));
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	assert_true(r.n_bad > C / 2);
	/* a constant: the reference's mean, 1/C */
	for (int c = 0; c < C; c++)
		bad[c] = 1.0f / C;
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	assert_true(r.n_bad > C / 2);
	/* bf16's 7 mantissa bits, rounded to nearest, fail at any length */
	for (int c = 0; c < C; c++)
		bad[c] = kg_bf16_to_f32(kg_f32_to_bf16(ref[c]));
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	assert_true(r.n_bad > C / 10 && r.tol_used > 2);
	/* fp16's 10, truncated: at 65536 terms within the bound (honest fp32 softmax rows are off by
	 * half as much: the documented limit of an fp32 policy), but failing where honest fp32 is far
	 * more precise, e.g. at 4096 terms (the matmul's K) */
	for (int c = 0; c < C; c++)
		bad[c] = keep_bits(ref[c], 10);
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 0);
	assert_true(r.normwise_err > 3e-4);
	kg_tol_resolve(&m, KG_F32, 4096, kg_rms(ref, KG_F32, C), &t);
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	assert_true(r.n_bad > C / 2);
	/* however long the reduction, the cap keeps bf16 out: LayerNorm's 4M-term rows, its bounds
	 * (with an RMS term), outputs of unit scale */
	const struct kg_tol_model ln = fp32_model(1e-4, 1e-4, 1e-6);
	for (int c = 0; c < C; c++) {
		ref[c] = (float)(c % 2 ? 1 : -1) * ref[c] * C;
		bad[c] = kg_bf16_to_f32(kg_f32_to_bf16(ref[c]));
	}
	kg_tol_resolve(&ln, KG_F32, 64 * 256 * 256, kg_rms(ref, KG_F32, C), &t);
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	assert_true(r.n_bad > C / 100);
	free(good);
	free(ref);
	free(bad);
}

/* factor: row. An honest fp32 softmax's error at C = 65536 is its row sum's, one factor common to
 * the row (~1e-4, which is why kgate 0.2 widened every element by the growth term g = 2^-10);
 * with that factor taken out, what is left is each element's own rounding. An exp of ~1.7e-4
 * relative error that varies from element to element (a cheap polynomial) passed under g, and fails
 * once g bounds only the row's factor; a row scaled by more than g still fails; so does bf16. */
static void test_row_factor(void **state)
{
	(void)state;
	float *got = malloc(C * sizeof(float)), *ref = malloc(C * sizeof(float)), *bad = malloc(C * sizeof(float));
	float *zero = calloc(C, sizeof(float));
	assert_true(got && ref && bad && zero);
	struct kg_tol_model wide = fp32_model(1e-9, 2e-5, 0), row = wide;
	row.factor_row = C;
	struct kg_tol tw, t;
	struct kg_cmp r;
	for (int w = 0; w < 2; w++) {
		softmax_pair(got, ref, w);
		kg_tol_resolve(&row, KG_F32, C, kg_rms(ref, KG_F32, C), &t);
		assert_true(t.rtol == 2e-5 && t.factor_row == C && t.factor_cap == 1.0 / 1024 && t.growth == 0);
		assert_int_equal(kg_compare(got, ref, KG_F32, C, &t, &r), 0);
		assert_true(r.tol_used < 0.2);
		assert_true(r.factor_max > 1e-5 && r.factor_max < 1e-3); /* the sum's error, taken out */
		assert_true(r.normwise_err > 1e-5);			 /* the raw error still reported */
		assert_true(r.normwise_res < 1e-6 && r.effective_bits > 20);
	}
	kg_tol_resolve(&wide, KG_F32, C, kg_rms(ref, KG_F32, C), &tw);
	/* an element-wise error of 1.7e-4 that varies: within g, not after the factor */
	for (int c = 0; c < C; c++)
		bad[c] = ref[c] * (float)(1 + 1.7e-4 * sin(0.7 * c));
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &tw, &r), 0);
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	assert_true(r.n_bad > 1000 && r.effective_bits < 14); /* most of a wide row is below atol */
	/* a whole row off by 5e-4 is a factor within g; by 2e-3 it is not */
	for (int c = 0; c < C; c++)
		bad[c] = ref[c] * (1 + 5e-4f);
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 0);
	assert_true(fabs(r.factor_max - 5e-4) < 1e-6);
	for (int c = 0; c < C; c++)
		bad[c] = ref[c] * (1 + 2e-3f);
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	assert_true(r.factor_max == 1.0 / 1024);
	/* bf16 rounding stays out */
	for (int c = 0; c < C; c++)
		bad[c] = kg_bf16_to_f32(kg_f32_to_bf16(ref[c]));
	assert_int_equal(kg_compare(bad, ref, KG_F32, C, &t, &r), 1);
	/* rows are fitted one by one: 64 rows of 1024, each with a factor of its own, and one row's
	 * element off by 1e-3; the vector pass and the scalar one (a zero terms array) agree */
	enum { R = 64, L = 1024 };
	uint64_t sd = 7;
	for (int i = 0; i < R * L; i++)
		ref[i] = (float)(unif(&sd) + 1e-3);
	for (int i = 0; i < R * L; i++)
		bad[i] = ref[i] * (float)(1 + 4e-4 * ((i / L) % 3 - 1) + 1e-7 * (unif(&sd) - 0.5));
	bad[37 * L + 5] *= 1.001f;
	struct kg_tol_model rows = fp32_model(1e-9, 2e-5, 0);
	rows.factor_row = L;
	kg_tol_resolve(&rows, KG_F32, 65536, 0, &t);
	struct kg_tol ts = t;
	ts.terms = zero;
	struct kg_cmp fast, slow;
	assert_int_equal(kg_compare(bad, ref, KG_F32, R * L, &t, &fast), 1);
	assert_int_equal(kg_compare(bad, ref, KG_F32, R * L, &ts, &slow), 1);
	assert_int_equal(fast.n_bad, 1);
	assert_int_equal(fast.first_bad, 37 * L + 5);
	assert_int_equal(slow.n_bad, 1);
	assert_int_equal(fast.tol_used_idx, slow.tol_used_idx);
	assert_true(fabs(fast.tol_used - slow.tol_used) <= 1e-12 * slow.tol_used);
	assert_true(fabs(fast.factor_max - 4e-4) < 1e-5);
	bad[37 * L + 5] = ref[37 * L + 5] * (float)(1 + 4e-4 * (37 % 3 - 1));
	assert_int_equal(kg_compare(bad, ref, KG_F32, R * L, &t, &fast), 0);
	free(got);
	free(ref);
	free(bad);
	free(zero);
}

/* M dot products of n terms, a (activations: mean +-mu, unit spread) and b (weights, zero mean),
 * summed in fp32 (optionally from bf16-rounded terms) against the double sum; T gets sum|a*b|.
 * Every one is steered to cancel (its last weight makes the exact sum near zero), as behind a
 * ReLU where the outputs that survive are the small ones: the output's RMS is small too. */
static void dots(int M, int n, double mu, int bf16, uint64_t seed, float *got, float *ref, float *T)
{
	uint64_t s = seed;
	float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	for (int i = 0; i < M; i++) {
		double dacc = 0;
		for (int k = 0; k < n; k++) {
			a[k] = (float)(mu + (2 * unif(&s) - 1));
			b[k] = (float)(2 * unif(&s) - 1);
			if (k < n - 1)
				dacc += (double)a[k] * b[k];
		}
		b[n - 1] = (float)(-dacc / a[n - 1] + 0.01 * (2 * unif(&s) - 1));
		float acc = 0;
		double exact = 0, mag = 0;
		for (int k = 0; k < n; k++) {
			float x = a[k], y = b[k];
			if (bf16) {
				x = kg_bf16_to_f32(kg_f32_to_bf16(x));
				y = kg_bf16_to_f32(kg_f32_to_bf16(y));
			}
			acc += x * y;
			exact += (double)a[k] * b[k];
			mag += fabs((double)a[k] * b[k]);
		}
		got[i] = acc;
		ref[i] = (float)exact;
		T[i] = (float)mag;
	}
	free(a);
	free(b);
}

static void test_term_magnitudes(void **state)
{
	(void)state;
	enum { M = 4000 };
	float got[M], ref[M], T[M];
	struct kg_tol t;
	struct kg_cmp r;
	/* the conv task's 27-term sums over large-mean activations (the ci flake): outputs that cancel
	 * to ~0.01 carry errors of u*sum|terms|, beyond what the output's RMS allows */
	const struct kg_tol_model conv = fp32_model(1e-5, 1e-4, 1e-6);
	dots(M, 27, 32, 0, 7, got, ref, T);
	kg_tol_resolve(&conv, KG_F32, 27, kg_rms(ref, KG_F32, M), &t);
	assert_int_equal(kg_compare(got, ref, KG_F32, M, &t, &r), 1);
	/* each element's own magnitudes admit them, with room */
	t.terms = T;
	t.terms_g = kg_tol_terms_g(&conv, KG_F32, 27);
	assert_true(t.terms_g > 10 * KG_U_FP32 && t.terms_g < 11 * KG_U_FP32);
	assert_int_equal(kg_compare(got, ref, KG_F32, M, &t, &r), 0);
	assert_true(r.tol_used < 0.5);
	/* bf16-rounded terms still fail, however the terms cancel: at 27 terms and at 4096 (matmul) */
	dots(M, 27, 32, 1, 8, got, ref, T);
	kg_tol_resolve(&conv, KG_F32, 27, kg_rms(ref, KG_F32, M), &t);
	t.terms = T;
	t.terms_g = kg_tol_terms_g(&conv, KG_F32, 27);
	assert_int_equal(kg_compare(got, ref, KG_F32, M, &t, &r), 1);
	assert_true(r.n_bad > M / 2);
	const struct kg_tol_model mm = fp32_model(1e-5, 1e-4, 1e-5);
	dots(200, 4096, 0, 1, 9, got, ref, T);
	kg_tol_resolve(&mm, KG_F32, 4096, kg_rms(ref, KG_F32, 200), &t);
	t.terms = T;
	t.terms_g = kg_tol_terms_g(&mm, KG_F32, 4096);
	assert_int_equal(kg_compare(got, ref, KG_F32, 200, &t, &r), 1);
	assert_true(r.n_bad > 100);
	/* honest fp32 at 4096 terms passes */
	dots(200, 4096, 0, 0, 10, got, ref, T);
	assert_int_equal(kg_compare(got, ref, KG_F32, 200, &t, &r), 0);
	assert_true(r.tol_used < 0.5);
}

/* LayerNorm rows against double, computed by an honest fp32 kernel (pairwise sums over leaves of 256,
 * and, for the allowance E_i, by the plainest one (sequential sums), as
 * tasks/layernorm/reference.c's kg_error_terms does. Rows are near-duplicates (one value, one
 * element in 16 moved by a tenth of the spread: the case that failed
 * examples/unusual/layernorm_pairwise.c at n = 198) or large-mean normal rows. keep: the mantissa
 * bits the kernel under test keeps of x (23: fp32 as it is; 7: it reads x as bf16); onepass: the
 * kernel under test takes the variance as E[x^2] - mean^2 from sequential sums. */
static float pair_sum(const float *x, int n, float mu, int sq, int keep, int leaf)
{
	if (n <= leaf) {
		float s = 0;
		for (int i = 0; i < n; i++) {
			float v = keep_bits(x[i], keep);
			s += sq == 2 ? v * v : sq ? (v - mu) * (v - mu) : v;
		}
		return s;
	}
	return pair_sum(x, n / 2, mu, sq, keep, leaf) + pair_sum(x + n / 2, n - n / 2, mu, sq, keep, leaf);
}

/* LayerNorm rows (no bias) as a kernel computes them in fp32 (pairwise sums, optionally from
 * inputs rounded to `keep` mantissa bits, or the one-pass variance; 1/std scaled by 1 + inv_err,
 * an approximate rsqrt) against the double reference, and E as tasks/layernorm/reference.c writes
 * it with one plain order (a sequential sum, its first order at these lengths): g (capped at 2^16
 * terms) times the condition, plus three times the order's errors of the mean and of 1/std. Rows
 * are near-duplicates of one value, or of mean 24 and unit spread, or (normal) of mean 0. */
enum { LN_LARGE_MEAN, LN_NEAR_DUP, LN_NORMAL };
static void layernorm_rows(int rows, int n, int kind, int keep, int onepass, double inv_err, uint64_t seed,
			   float *got, float *ref, float *E)
{
	uint64_t s = seed;
	float *x = malloc((size_t)n * sizeof(float)), *w = malloc((size_t)n * sizeof(float));
	assert_true(x && w);
	for (int i = 0; i < n; i++)
		w[i] = (float)(0.5 + 3 * unif(&s));
	double g = 2 * sqrt(fmin(n + 1.0, 65536)) * KG_U_FP32;
	for (int r = 0; r < rows; r++) {
		double v0 = 4 * unif(&s) - 2, sc = 0.25 + unif(&s);
		for (int i = 0; i < n; i++) {
			double z = sqrt(-2 * log(unif(&s) + 1e-300)) * cos(6.283185307179586 * unif(&s));
			x[i] = kind == LN_NEAR_DUP ? (float)(v0 + (rng(&s) % 16 == 0 ? 0.1 * sc * z : 0))
						   : (float)((kind == LN_NORMAL ? v0 : 24) + z);
		}
		int leaf = onepass ? n : 256; /* the one-pass kernel as examples/hostile/onepass_var.c: sequential */
		float mu = pair_sum(x, n, 0, 0, keep, leaf) / (float)n;
		float var = onepass ? pair_sum(x, n, 0, 2, keep, leaf) / (float)n - mu * mu
				    : pair_sum(x, n, mu, 1, keep, leaf) / (float)n;
		float inv = (float)(1.0f / sqrtf((var < 0 ? 0 : var) + 1e-5f) * (1 + inv_err));
		float s0 = 0, s1 = 0; /* the plain order */
		for (int i = 0; i < n; i++)
			s0 += x[i];
		float mu_p = s0 / (float)n;
		for (int i = 0; i < n; i++)
			s1 += (x[i] - mu_p) * (x[i] - mu_p);
		float inv_p = 1.0f / sqrtf(s1 / (float)n + 1e-5f);
		double m = 0, ma = 0, v = 0;
		for (int i = 0; i < n; i++) {
			m += x[i];
			ma += fabs(x[i]);
		}
		m /= n;
		ma /= n;
		for (int i = 0; i < n; i++)
			v += (x[i] - m) * (x[i] - m);
		double dinv = 1 / sqrt(v / n + 1e-5);
		double emu = fabs(mu_p - m) * dinv, einv = fabs(inv_p / dinv - 1);
		for (int i = 0; i < n; i++) {
			double y = (x[i] - m) * dinv * w[i], c = fabs(x[i] - m) * dinv;
			got[(size_t)r * n + i] = (keep_bits(x[i], keep) - mu) * inv * w[i];
			ref[(size_t)r * n + i] = (float)y;
			E[(size_t)r * n + i] = (float)(g * (c + ma * dinv) * w[i] + 3 * (emu + einv * c) * w[i]);
		}
	}
	free(x);
	free(w);
}

/* terms: reference: the task's allowance is the bound (no growth term), beside the task's
 * rounding-level tolerance (LayerNorm's 1e-5) */
static void test_reference_terms(void **state)
{
	(void)state;
	enum { ROWS = 40, N = 198, BIG = 2048, LONG = 65536 };
	float *got = malloc(ROWS * LONG * sizeof(float)), *ref = malloc(ROWS * LONG * sizeof(float));
	float *E = malloc(ROWS * LONG * sizeof(float));
	assert_true(got && ref && E);
	struct kg_tol_model ln = fp32_model(1e-5, 1e-5, 1e-6);
	ln.reference_terms = 1;
	struct kg_tol t;
	struct kg_cmp r;
	struct {
		int rows, n, kind, keep, onepass;
		double inv_err;
		int fails;
	} cases[] = {
		/* the failure: the mean's rounding, magnified by |w|/std, past the output-wide bound ... */
		{ROWS, N, LN_NEAR_DUP, 23, 0, 0, 0},
		{ROWS, BIG, LN_NEAR_DUP, 23, 0, 0, 0},
		{ROWS, BIG, LN_LARGE_MEAN, 23, 0, 0, 0},
		{4, LONG, LN_NORMAL, 23, 0, 0, 0},
		/* ... while a kernel that reads x as bf16, or takes a one-pass variance, stays outside its
		 * own allowance too, on near-duplicate and on large-mean rows */
		{ROWS, N, LN_NEAR_DUP, 7, 0, 0, 1},
		{ROWS, BIG, LN_LARGE_MEAN, 7, 0, 0, 1},
		{ROWS, N, LN_NEAR_DUP, 23, 1, 0, 1},
		{ROWS, BIG, LN_LARGE_MEAN, 23, 1, 0, 1},
		/* and so does 1/std off by 1e-4 (an rsqrt estimate without its Newton step is off by up to
		 * 3.7e-4) on rows of 65536, which the growth term 2^-10 let through */
		{4, LONG, LN_NORMAL, 23, 0, 1e-4, 1},
		{ROWS, BIG, LN_NORMAL, 23, 0, 1e-4, 1},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int M = cases[c].rows * cases[c].n;
		layernorm_rows(cases[c].rows, cases[c].n, cases[c].kind, cases[c].keep, cases[c].onepass, cases[c].inv_err,
			       11 + c, got, ref, E);
		kg_tol_resolve(&ln, KG_F32, cases[c].n, kg_rms(ref, KG_F32, (size_t)M), &t);
		assert_true(t.growth == 0 && t.rtol == 1e-5);
		if (c == 0)
			assert_int_equal(kg_compare(got, ref, KG_F32, (size_t)M, &t, &r), 1);
		if (cases[c].inv_err > 0) { /* the growth term would have passed it */
			struct kg_tol_model wide = fp32_model(1e-4, 1e-4, 1e-6);
			struct kg_tol tw;
			kg_tol_resolve(&wide, KG_F32, 64 * 256 * 256, kg_rms(ref, KG_F32, (size_t)M), &tw);
			assert_int_equal(kg_compare(got, ref, KG_F32, (size_t)M, &tw, &r), 0);
		}
		t.terms = E;
		t.terms_g = 1.0;
		int bad = kg_compare(got, ref, KG_F32, (size_t)M, &t, &r);
		if (bad != cases[c].fails)
			fail_msg("case %zu: %s at %.3g of the bound", c, bad ? "rejected" : "accepted", r.tol_used);
		if (!cases[c].fails)
			assert_true(r.tol_used < 0.6);
		else
			assert_true(r.tol_used > 1.5);
	}
	free(got);
	free(ref);
	free(E);
}

/* The fp32 fast path (vector blocks, compare.c) gives what the scalar pass gives: counts, first
 * indices, maxima and where they are; the norm-wise sums up to their order of addition. A zero
 * terms array sends the same data through the scalar pass. */
static void test_fast_path_matches_scalar(void **state)
{
	(void)state;
	enum { N = 5 * 2048 + 123 };
	float *got = malloc(N * sizeof(float)), *exp = malloc(N * sizeof(float)), *zero = calloc(N, sizeof(float));
	assert_true(got && exp && zero);
	for (int c = 0; c < 8; c++) {
		uint64_t s = 0x1234567ull + (uint64_t)c;
		for (int i = 0; i < N; i++) {
			exp[i] = (float)(4 * unif(&s) - 2);
			got[i] = exp[i] + (float)(1e-6 * (unif(&s) - 0.5));
		}
		struct kg_tol t = {.atol = 1e-6, .rtol = 1e-5};
		switch (c) {
		case 1: /* one bad element in the third block */
			got[2 * 2048 + 17] += 0.5f;
			break;
		case 2: /* NaN and Inf mismatches, and a NaN where the reference has one */
			got[3000] = NAN;
			got[9000] = INFINITY;
			exp[100] = got[100] = NAN;
			break;
		case 3: /* exact zeros under a zero atol: a zero bound */
			t.atol = 0;
			exp[4100] = 0;
			got[4100] = 0;
			exp[4200] = 0;
			got[4200] = 1e-9f;
			break;
		case 4: /* the largest error in the tail past the last full block */
			got[N - 5] += 1e-5f;
			break;
		case 5: /* ties: the same largest error twice, the first one counts */
			got[10] = exp[10] + 5e-6f;
			got[5000] = exp[5000] + 5e-6f;
			exp[5000] = exp[10];
			got[5000] = got[10];
			break;
		case 6: /* everything bad */
			for (int i = 0; i < N; i++)
				got[i] = -exp[i] - 1;
			break;
		default:
			break;
		}
		struct kg_cmp fast, slow;
		struct kg_tol ts = t;
		ts.terms = zero;
		ts.terms_g = 0;
		int rf = kg_compare(got, exp, KG_F32, N, &t, &fast), rs = kg_compare(got, exp, KG_F32, N, &ts, &slow);
		assert_int_equal(rf, rs);
		assert_int_equal(fast.n, slow.n);
		assert_int_equal(fast.n_bad, slow.n_bad);
		assert_int_equal(fast.n_nan, slow.n_nan);
		assert_int_equal(fast.n_inf, slow.n_inf);
		assert_int_equal(fast.first_bad, slow.first_bad);
		assert_int_equal(fast.first_nan, slow.first_nan);
		assert_int_equal(fast.max_abs_idx, slow.max_abs_idx);
		assert_true(fast.max_abs_err == slow.max_abs_err);
		assert_int_equal(fast.max_rel_idx, slow.max_rel_idx);
		assert_true(fast.max_rel_err == slow.max_rel_err);
		assert_int_equal(fast.tol_used_idx, slow.tol_used_idx);
		assert_true(fast.tol_used == slow.tol_used);
		assert_true(fast.normwise_err == slow.normwise_err ||
			    fabs(fast.normwise_err - slow.normwise_err) <= 1e-12 * fabs(slow.normwise_err));
	}
	free(got);
	free(exp);
	free(zero);
}

static void layout(struct kg_arena *a)
{
	kg_dtype dt[2] = {KG_F32, KG_F16};
	int nd[2] = {1, 2};
	int64_t shape[2][KG_MAX_DIMS] = {{10}, {3, 3}};
	kg_error e;
	assert_int_equal(kg_arena_layout(a, 0, 0, 1, 1, dt, nd, (const int64_t(*)[KG_MAX_DIMS])shape, &e), 0);
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

/* kgate-device's judgement (device/judge.h, run here on the host as the fake keeper runs it)
 * against kg_compare on outputs with every kind of element: within the bound, outside it, NaN on
 * either side or both, Inf mismatched and matched, ties of the maximum; with and without row
 * factors, fp32 and f16; plus the unwritten elements against the poison. */
static void judge_against_compare(kg_dtype dt, int64_t row, int salt)
{
	enum { N = 6000 };
	size_t es = kg_dtype_size(dt);
	unsigned char *g = malloc(N * es), *x = malloc(N * es);
	assert_non_null(g);
	assert_non_null(x);
	uint64_t st = 0x1234567u + (uint64_t)salt;
	for (int i = 0; i < N; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		double v = (double)(st >> 11) * 0x1.0p-53 * 4 - 2, w = v * (1.0 + 3e-6 * ((st >> 7 & 255) / 255.0 - 0.5));
		int kind = (int)(st >> 40) % 97;
		if (kind == 0)
			w = v + 0.5; /* outside */
		else if (kind == 1)
			w = NAN;
		else if (kind == 2)
			v = w = NAN;
		else if (kind == 3)
			v = NAN;
		else if (kind == 4)
			w = INFINITY;
		else if (kind == 5)
			v = w = -INFINITY;
		else if (kind == 6)
			w = v * 1.0001; /* a common row factor's worth */
		kg_store(x, dt, (size_t)i, v);
		kg_store(g, dt, (size_t)i, w);
	}
	for (int pass = 0; pass < 2; pass++) {
		struct kg_tol t = {.atol = 1e-5, .rtol = 1e-4, .factor_row = row, .factor_cap = 2e-4};
		if (pass) { /* everything within a wide bound, but the NaN/Inf */
			t.atol = 10;
		}
		struct kg_cmp want;
		int bad = kg_compare(g, x, dt, N, &t, &want);
		struct kg_dev_check c = {.n = N, .row = (uint64_t)row, .atol = t.atol, .rtol = t.rtol, .cap = t.factor_cap,
					 .dtype = (uint32_t)dt, .mode = KG_DEV_CHK_COMPARE, .poison = 0x7fc0dead7fc0deadull};
		struct kg_dev_cmp got;
		kg_judge_host(&c, g, x, &got);
		assert_int_equal(bad, got.n_bad > 0);
		assert_true(got.hash == kg_judge_hash(g, (uint32_t)dt, N)); /* the host's hash of a call not judged */
		assert_int_equal(got.n, want.n);
		assert_int_equal(got.n_bad, want.n_bad);
		assert_int_equal(got.n_nan, want.n_nan);
		assert_int_equal(got.n_inf, want.n_inf);
		assert_int_equal(got.first_bad, want.first_bad);
		assert_int_equal(got.first_nan, want.first_nan);
		assert_int_equal(got.max_abs_idx, want.max_abs_idx);
		assert_int_equal(got.max_rel_idx, want.max_rel_idx);
		assert_int_equal(got.tol_used_idx, want.tol_used_idx);
		assert_true(got.max_abs_err == want.max_abs_err);
		assert_true(got.tol_used == want.tol_used || fabs(got.tol_used - want.tol_used) <= 1e-12 * want.tol_used);
		assert_true(got.factor_max == want.factor_max || fabs(got.factor_max - want.factor_max) < 1e-15);
		assert_true(fabs(got.ref_sq - want.ref_sq) <= 1e-12 * want.ref_sq);
		assert_true(isinf(want.res_sq) ? isinf(got.res_sq) : fabs(got.res_sq - want.res_sq) <= 1e-9 * want.res_sq + 1e-300);
	}
	free(g);
	free(x);
}

static void test_judge_matches_compare(void **state)
{
	(void)state;
	judge_against_compare(KG_F32, 0, 1);
	judge_against_compare(KG_F32, 100, 2);
	judge_against_compare(KG_F16, 0, 3);
	judge_against_compare(KG_F16, 60, 4);
	/* unwritten: the candidate's poison where the reference's is not */
	float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint32_t pw = 0x7fc0beefu;
	memcpy(&g[5], &pw, 4);
	memcpy(&g[6], &pw, 4);
	memcpy(&x[6], &pw, 4);
	struct kg_dev_check c = {.n = 8, .atol = 1, .rtol = 0, .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_COMPARE, .poison = pw};
	struct kg_dev_cmp out;
	kg_judge_host(&c, g, x, &out);
	assert_int_equal(out.first_unwritten, 5);
	/* STATS: sums over the finite elements, the poison, the distance from constants */
	float r[6] = {1, 3, NAN, INFINITY, 2, 2};
	memcpy(&r[4], &pw, 4);
	struct kg_dev_check s = {.n = 6, .atol = 0.5, .rtol = 0, .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_STATS,
				 .poison = pw, .near = 1, .c = {2.0, 0.0}};
	kg_judge_host(&s, r, NULL, &out);
	assert_int_equal(out.n_finite, 3);
	assert_true(out.sum == 6.0 && out.sum_sq == 14.0);
	assert_int_equal(out.first_poison, 4);
	assert_int_equal(out.far[0], 5); /* 1, 3, NaN, Inf and the poison (a NaN) are not within 0.5 of 2 */
	assert_int_equal(out.far[1], 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_within_tolerance), cmocka_unit_test(test_mismatch_located),
		cmocka_unit_test(test_judge_matches_compare),
		cmocka_unit_test(test_nonfinite),	 cmocka_unit_test(test_half_precision),
		cmocka_unit_test(test_arena_canary),	 cmocka_unit_test(test_arena_poison),
		cmocka_unit_test(test_growth_term),	 cmocka_unit_test(test_normwise_and_share),
		cmocka_unit_test(test_long_sum_noise_passes), cmocka_unit_test(test_dot_product_noise_passes),
		cmocka_unit_test(test_shortcuts_still_fail), cmocka_unit_test(test_term_magnitudes),
		cmocka_unit_test(test_reference_terms), cmocka_unit_test(test_fast_path_matches_scalar),
		cmocka_unit_test(test_row_factor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
