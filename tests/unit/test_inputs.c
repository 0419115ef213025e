/* Unit tests of the input classes that put structure at secret places (spiked: one outlier per
 * row; mixed: a class per row), of the table's seeded column that the timed calls rely on (every
 * seeded class gives two trial keys different inputs, every other one the same), and of the
 * generator's core (common/kg_gen.h) that kgate-device runs on the GPU: the host's threaded fill
 * and any sub-range computed alone give the same bits, its exp and log track libm's, and its
 * normal deviates are normal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/dtype.h"
#include "verifier/plan/inputs.h"
#include "verifier/plan/prng.h"

static kg_key key_of(uint32_t s)
{
	kg_key k;
	memset(&k, 0, sizeof(k));
	k.w[0] = s;
	k.w[3] = 0x5eed;
	return k;
}

static float *fill(enum kg_input_class c, unsigned mix, uint32_t seed, const int64_t *shape, int ndim)
{
	size_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= (size_t)shape[d];
	float *a = malloc(n * sizeof(float));
	assert_non_null(a);
	kg_key k = key_of(seed);
	kg_inputs_fill(a, KG_F32, n, shape, ndim, KG_ROLE_ACTIVATION, c, mix, &k, 0);
	return a;
}

/* Every class, every dtype, shapes that end mid-block and mid-row, one of several chunks: the
 * host's fill (eight blocks at a time, on threads) is, bit for bit, the scalar core run once over
 * the whole tensor, which is what each device thread runs over its elements. */
static void test_core_matches_fill(void **state)
{
	(void)state;
	const kg_dtype dts[] = {KG_F32, KG_F16, KG_BF16, KG_I32, KG_I64, KG_U8, KG_BOOL};
	const int64_t shapes[][3] = {{3, 37, 37}, {5, 7, 131}, {1, 1, 9}};
	kg_key k = key_of(77);
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++)
			for (int c = 0; c < KG_CLASS_COUNT_; c++) {
				size_t n = (size_t)(shapes[sh][0] * shapes[sh][1] * shapes[sh][2]);
				size_t es = kg_dtype_size(dts[d]);
				unsigned char *a = calloc(n, es), *b = calloc(n, es);
				assert_non_null(a);
				assert_non_null(b);
				struct kg_gen_tensor t;
				kg_inputs_params(&t, dts[d], n, shapes[sh], 3, KG_ROLE_ACTIVATION, (enum kg_input_class)c,
						 KG_CLASS_ALL, &k, 2);
				assert_true(kg_gen_valid(&t, n * es));
				kg_inputs_fill_tensor(a, &t, &k);
				kg_gen_range(&t, k.w, kg_inputs_zig(), b, 0, n);
				assert_memory_equal(a, b, n * es);
				free(a);
				free(b);
			}
	/* past one chunk of the host's split (1 Mi elements), spiked rows straddling it */
	int64_t big[2] = {3, 700001};
	size_t n = 3 * 700001;
	float *a = malloc(n * 4), *b = malloc(n * 4);
	assert_non_null(a);
	assert_non_null(b);
	struct kg_gen_tensor t;
	kg_inputs_params(&t, KG_F32, n, big, 2, KG_ROLE_ACTIVATION, KG_CLASS_SPIKED, KG_CLASS_ALL, &k, 0);
	kg_inputs_fill_tensor(a, &t, &k);
	kg_gen_range(&t, k.w, kg_inputs_zig(), b, 0, n);
	assert_memory_equal(a, b, n * 4);
	free(a);
	free(b);
}

/* Counter-based: any range computed on its own is those elements of the whole, whatever its start
 * (mid-block, mid-row), so the device may split the work any way it likes. */
static void test_core_subranges(void **state)
{
	(void)state;
	kg_key k = key_of(5);
	int64_t shape[2] = {41, 53};
	size_t n = 41 * 53;
	for (int c = 0; c < KG_CLASS_COUNT_; c++) {
		struct kg_gen_tensor t;
		kg_inputs_params(&t, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, (enum kg_input_class)c, KG_CLASS_ALL, &k, 1);
		float *whole = malloc(n * 4), *part = malloc(n * 4);
		assert_non_null(whole);
		assert_non_null(part);
		kg_gen_range(&t, k.w, kg_inputs_zig(), whole, 0, n);
		memset(part, 0, n * 4);
		const uint64_t cuts[] = {0, 3, 8, 53, 54, 1000, 1001, n};
		for (size_t i = 0; i + 1 < sizeof(cuts) / sizeof(cuts[0]); i++)
			kg_gen_range(&t, k.w, kg_inputs_zig(), part, cuts[i], cuts[i + 1]);
		assert_memory_equal(whole, part, n * 4);
		free(whole);
		free(part);
	}
}

/* The core's own exp and log (basic operations only, the same bits on the GPU) within 4 ulp of
 * libm's over the ranges the generator uses, denormal results included. */
static void test_core_exp_log(void **state)
{
	(void)state;
	for (double x = -744.0; x < 709.0; x += 0.37) {
		double want = exp(x), got = kg_gen_exp(x);
		if (want < 1e-300)
			assert_true(fabs(got - want) <= 4 * 4.9e-324 + 1e-15 * want);
		else
			assert_true(fabs(got - want) <= 4e-16 * want);
	}
	for (double x = 1e-300; x < 1e300; x *= 1.7) {
		double want = log(x), got = kg_gen_log(x);
		assert_true(fabs(got - want) <= 4e-16 * fabs(want) + 1e-300);
	}
	assert_true(fabs(kg_gen_log(5e-324) - log(5e-324)) < 1e-12);
	assert_true(fabs(kg_gen_log(1.0 - 1e-16) - log(1.0 - 1e-16)) < 1e-30);
	assert_true(isinf(kg_gen_log(0.0)) && kg_gen_log(0.0) < 0);
	assert_true(kg_gen_exp(-800.0) == 0.0 && isinf(kg_gen_exp(800.0)));
	assert_true(fabs(kg_gen_exp10(0.6) - pow(10.0, 0.6)) < 1e-14);
}

/* 2^21 deviates: mean 0 and variance 1 within a few standard errors, the tail past the ziggurat's
 * edge (3.4426) as often as the normal law says (5.76e-4), and symmetric. */
static void test_core_normal_moments(void **state)
{
	(void)state;
	const size_t n = 1u << 21;
	float *a = malloc(n * 4);
	assert_non_null(a);
	kg_key k = key_of(9);
	struct kg_gen_tensor t;
	int64_t shape[1] = {(int64_t)n};
	kg_inputs_params(&t, KG_F32, n, shape, 1, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 0, &k, 0);
	t.offset = 0;
	t.scale = 1;
	kg_inputs_fill_tensor(a, &t, &k);
	double s = 0, s2 = 0;
	size_t tail = 0, neg = 0;
	for (size_t i = 0; i < n; i++) {
		s += a[i];
		s2 += (double)a[i] * a[i];
		tail += fabsf(a[i]) > 3.442619855899f;
		neg += a[i] < 0;
	}
	double mean = s / (double)n, var = s2 / (double)n - mean * mean;
	assert_true(fabs(mean) < 4.0 / sqrt((double)n));
	assert_true(fabs(var - 1.0) < 4.0 * sqrt(2.0 / (double)n));
	double pt = 5.7609e-4 * (double)n;
	assert_true(fabs((double)tail - pt) < 5.0 * sqrt(pt));
	assert_true(fabs((double)neg - (double)n / 2) < 4.0 * sqrt((double)n) / 2);
	free(a);
}

/* What kgate-device refuses: an unknown kind or dtype, bytes that are not n elements, a mix the
 * rows may not take, integers drawn as floats. */
/* A bool input (a mask) holds 0 and 1 alike and nothing else; a whole model's inputs (hundreds)
 * each draw from streams of their own, and inputs 0-127 from the streams they always had. */
static void test_bool_and_many_tensors(void **state)
{
	(void)state;
	kg_key k = key_of(9);
	int64_t shape[1] = {4096};
	unsigned char m[4096];
	kg_inputs_fill(m, KG_BOOL, 4096, shape, 1, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, KG_CLASS_ALL, &k, 3);
	int ones = 0;
	for (int i = 0; i < 4096; i++) {
		assert_true(m[i] <= 1);
		ones += m[i];
	}
	assert_in_range(ones, 1800, 2300);
	for (uint32_t t = 0; t < 128; t++)
		assert_int_equal(KG_GEN_STREAM(t, KG_GEN_S_ELEM), t << 24 | KG_GEN_S_ELEM);
	/* every stream of tensors 0..1023 distinct, the top bit (the verifier's own streams) clear */
	static const uint32_t codes[] = {0, KG_GEN_S_ELEM, KG_GEN_S_EXTRA, KG_GEN_S_BASE, KG_GEN_S_ROW, KG_GEN_S_SPIKE,
					 KG_GEN_S_MIX};
	enum { N = 1024 * 7 };
	uint32_t *all = malloc(N * sizeof(*all));
	assert_non_null(all);
	for (uint32_t t = 0; t < 1024; t++)
		for (int c = 0; c < 7; c++) {
			all[t * 7 + (uint32_t)c] = KG_GEN_STREAM(t, codes[c]);
			assert_false(all[t * 7 + (uint32_t)c] >> 31);
		}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			if (all[i] == all[j])
				fail_msg("streams %d and %d are both %#x", i, j, all[i]);
	free(all);
	/* and their elements differ: input 130's normal draw is not input 2's */
	float a[64], b[64];
	int64_t s64[1] = {64};
	kg_inputs_fill(a, KG_F32, 64, s64, 1, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, KG_CLASS_ALL, &k, 2);
	kg_inputs_fill(b, KG_F32, 64, s64, 1, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, KG_CLASS_ALL, &k, 130);
	assert_memory_not_equal(a, b, sizeof(a));
	struct kg_gen_tensor t;
	kg_inputs_params(&t, KG_F32, 64, s64, 1, KG_ROLE_WEIGHT, KG_CLASS_NORMAL, KG_CLASS_ALL, &k, 700);
	assert_true(kg_gen_valid(&t, 256));
	t.tensor = KG_GEN_MAX_TENSOR;
	assert_false(kg_gen_valid(&t, 256));
}

static void test_core_valid(void **state)
{
	(void)state;
	kg_key k = key_of(1);
	int64_t shape[2] = {4, 8};
	struct kg_gen_tensor t;
	kg_inputs_params(&t, KG_F32, 32, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_MIXED, KG_CLASS_ALL, &k, 0);
	assert_true(kg_gen_valid(&t, 128));
	assert_false(kg_gen_valid(&t, 127));
	struct kg_gen_tensor x = t;
	x.kind = KG_GEN_KIND_END_;
	assert_false(kg_gen_valid(&x, 128));
	x = t;
	x.dtype = 9;
	assert_false(kg_gen_valid(&x, 128));
	x = t;
	x.mix[0] = KG_GEN_MIXED;
	assert_false(kg_gen_valid(&x, 128));
	x = t;
	x.n_mix = KG_GEN_MAX_MIX + 1;
	assert_false(kg_gen_valid(&x, 128));
	x = t;
	x.rowlen = 0;
	assert_false(kg_gen_valid(&x, 128));
	x = t;
	x.dtype = KG_GEN_I32;
	assert_false(kg_gen_valid(&x, 128));
	x.kind = KG_GEN_INT;
	assert_true(kg_gen_valid(&x, 128));
	x.kind = KG_GEN_ZEROS;
	assert_true(kg_gen_valid(&x, 128));
}

/* Each row holds exactly one value past 88.7 in magnitude (exp overflows) at least 90 away from
 * every other element of the row, all finite; the outlier's column is not the same in every row,
 * nor in every trial; about half are positive. */
static void test_spiked(void **state)
{
	(void)state;
	enum { R = 256, C = 1000 };
	int64_t shape[2] = {R, C};
	float *a = fill(KG_CLASS_SPIKED, KG_CLASS_ALL, 1, shape, 2), *b = fill(KG_CLASS_SPIKED, KG_CLASS_ALL, 2, shape, 2);
	int first = 0, positive = 0, moved = 0;
	int64_t col0 = -1;
	for (int r = 0; r < R; r++) {
		int big = 0;
		int64_t at = -1;
		double lo = INFINITY, hi = -INFINITY;
		for (int c = 0; c < C; c++) {
			float v = a[r * C + c];
			assert_true(isfinite(v));
			if (fabsf(v) > 88.7f) {
				big++;
				at = c;
			} else {
				lo = fmin(lo, v);
				hi = fmax(hi, v);
			}
		}
		assert_int_equal(big, 1);
		float s = a[r * C + at];
		assert_true(s > 0 ? s - hi > 90 : lo - s > 90);
		assert_true(fabsf(s) < 500);
		positive += s > 0;
		first += at == 0;
		if (col0 < 0)
			col0 = at;
		moved += at != col0;
		int bat = -1;
		for (int c = 0; c < C; c++)
			if (fabsf(b[r * C + c]) > 88.7f)
				bat = c;
		moved += bat != at;
	}
	assert_true(first < 4);
	assert_true(positive > R / 4 && positive < 3 * R / 4);
	assert_true(moved > R);
	/* weights stay normal: no outliers */
	kg_key k = key_of(1);
	kg_inputs_fill(a, KG_F32, R * C, shape, 2, KG_ROLE_WEIGHT, KG_CLASS_SPIKED, KG_CLASS_ALL, &k, 0);
	for (int i = 0; i < R * C; i++)
		assert_true(fabsf(a[i]) < 60);
	free(a);
	free(b);
}

/* The rows of a mixed tensor: their classes differ from row to row and from key to key, they are
 * only the seeded ones among those given (never zeros or ones; special only when given), and a
 * row that straddles the 1 Mi-element chunks is still one row (a constant row stays constant). */
static void test_mixed(void **state)
{
	(void)state;
	enum { R = 400, C = 64 };
	int64_t shape[2] = {R, C};
	unsigned no_special = KG_CLASS_ALL & ~(1u << KG_CLASS_SPECIAL);
	float *a = fill(KG_CLASS_MIXED, no_special, 3, shape, 2);
	int constant = 0, spiked = 0, large = 0, negative = 0, zero_rows = 0;
	for (int r = 0; r < R; r++) {
		int same = 1, big = 0, neg = 1, zero = 1;
		for (int c = 0; c < C; c++) {
			float v = a[r * C + c];
			assert_true(isfinite(v)); /* no special rows */
			same &= v == a[r * C];
			big += fabsf(v) > 500;
			neg &= v < 0;
			zero &= v == 0;
		}
		constant += same;
		large += big == C;
		negative += neg;
		zero_rows += zero;
		int outliers = 0;
		for (int c = 0; c < C; c++)
			outliers += fabsf(a[r * C + c]) > 88.7f && fabsf(a[r * C + c]) < 500;
		spiked += outliers == 1;
	}
	/* 11 row classes when special is left out: each about R/11 = 36 rows */
	assert_true(constant > 10 && constant < 80);
	assert_true(large > 10 && large < 80);
	assert_true(spiked > 10);
	assert_true(negative > 10);
	assert_int_equal(zero_rows, 0);
	float *b = fill(KG_CLASS_MIXED, no_special, 4, shape, 2);
	int differ = 0;
	for (int r = 0; r < R; r++) {
		int same_b = 1;
		for (int c = 1; c < C; c++)
			same_b &= b[r * C + c] == b[r * C];
		int same_a = 1;
		for (int c = 1; c < C; c++)
			same_a &= a[r * C + c] == a[r * C];
		differ += same_a != same_b;
	}
	assert_true(differ > 10); /* the constant rows sit elsewhere under another key */
	free(b);
	/* given special, NaN rows appear; given normal only, every row is normal-like */
	float *s = fill(KG_CLASS_MIXED, KG_CLASS_ALL, 3, shape, 2);
	int nans = 0;
	for (int i = 0; i < R * C; i++)
		nans += isnan(s[i]);
	assert_true(nans > 0);
	free(s);
	float *n = fill(KG_CLASS_MIXED, 1u << KG_CLASS_NORMAL, 3, shape, 2);
	for (int i = 0; i < R * C; i++)
		assert_true(fabsf(n[i]) < 40);
	free(n);
	free(a);
	/* rows straddling chunks: 3 rows of 700 000; whatever class each took, it took it whole */
	int64_t big[2] = {3, 700000};
	float *l = fill(KG_CLASS_MIXED, 1u << KG_CLASS_NORMAL | 1u << KG_CLASS_CONSTANT_ROWS, 9, big, 2);
	for (int r = 0; r < 3; r++) {
		int same = 1;
		for (int c = 1; c < 700000; c++)
			same &= l[r * 700000 + c] == l[r * 700000];
		int same_tail = 1;
		for (int c = 600000; c < 700000; c++)
			same_tail &= l[r * 700000 + c] == l[r * 700000];
		assert_int_equal(same, same_tail);
	}
	free(l);
}

/* The seeded column says the truth, both ways: a seeded class's activations differ between two
 * trial keys at every shape (what keeps a timed call's inputs from repeating an earlier call's),
 * and a class said not to be seeded gives the same activations under any key where it applies
 * (identity is normal data away from square matrices, but timed calls do not rely on that).
 * Shapes: a square matrix, a long row, a batch of short rows, and one element. */
static void test_seeded_classes_differ(void **state)
{
	(void)state;
	int64_t shapes[4][2] = {{33, 33}, {2, 5000}, {300, 7}, {1, 1}};
	int n_seeded = 0;
	for (int c = 0; c < KG_CLASS_COUNT_; c++) {
		enum kg_input_class k = (enum kg_input_class)c;
		int seeded = kg_class_is_seeded(k);
		n_seeded += seeded;
		for (int s = 0; s < 4; s++) {
			size_t n = (size_t)(shapes[s][0] * shapes[s][1]);
			float *a = fill(k, KG_CLASS_ALL, 11, shapes[s], 2), *b = fill(k, KG_CLASS_ALL, 12, shapes[s], 2);
			int same = !memcmp(a, b, n * sizeof(float));
			if (seeded && same)
				fail_msg("class %s is seeded but two keys gave the same %lldx%lld inputs", kg_class_name(k),
					 (long long)shapes[s][0], (long long)shapes[s][1]);
			if (!seeded && !same && (s == 0 || k != KG_CLASS_IDENTITY))
				fail_msg("class %s is not seeded but two keys gave different inputs", kg_class_name(k));
			free(a);
			free(b);
		}
	}
	/* zeros, ones and identity are all that repeat */
	assert_int_equal(n_seeded, KG_CLASS_COUNT_ - 3);
	assert_false(kg_class_is_seeded(KG_CLASS_ZEROS));
	assert_false(kg_class_is_seeded(KG_CLASS_ONES));
	assert_false(kg_class_is_seeded(KG_CLASS_IDENTITY));
	assert_false(kg_class_is_seeded(KG_CLASS_COUNT_));
	assert_true(kg_class_is_seeded(KG_CLASS_SPIKED));
	assert_true(kg_class_is_seeded(KG_CLASS_MIXED));
}

/* A normalisation's running variance (role variance) is positive and away from zero under every
 * class, zeros, negative and large included; a running mean (role statistic) is drawn like a
 * weight, random under every class. */
static void test_variance_role(void **state)
{
	(void)state;
	enum { N = 4096 };
	const int64_t shape[1] = {N};
	float *a = malloc(N * sizeof(float));
	assert_non_null(a);
	for (int c = 0; c < KG_CLASS_COUNT_; c++)
		for (uint32_t seed = 1; seed <= 8; seed++) {
			kg_key k = key_of(seed);
			kg_inputs_fill(a, KG_F32, N, shape, 1, KG_ROLE_VARIANCE, (enum kg_input_class)c, KG_CLASS_ALL, &k, 3);
			float lo = a[0], hi = a[0];
			for (int i = 0; i < N; i++)
				lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]);
			if (!(lo >= 0.25f * 0.25f * 0.999f && hi <= 1.75f * 4.0f * 1.001f && hi > lo))
				fail_msg("class %s seed %u: variance in [%g, %g]", kg_class_name((enum kg_input_class)c), seed,
					 (double)lo, (double)hi);
			kg_inputs_fill(a, KG_F32, N, shape, 1, KG_ROLE_STATISTIC, (enum kg_input_class)c, KG_CLASS_ALL, &k, 3);
			int distinct = 0;
			for (int i = 1; i < N; i++)
				distinct += a[i] != a[0];
			assert_true(distinct > N / 2);
		}
	free(a);
}

/* large_mean sized to the task's bound: the dtype's own 16 under the C LayerNorm's 1e-5, about 90
 * under a module task's 1e-4, whatever the order of rtol and rms; half precisions keep theirs. A
 * draw given lo has its mean in [lo, 2 lo), its unit spread kept; other draws are left alone. */
static void test_large_mean_sized(void **state)
{
	(void)state;
	assert_true(kg_inputs_large_mean_for(KG_F32, 1e-5, 1e-6) == 16.0);
	double m = kg_inputs_large_mean_for(KG_F32, 1e-4, 1e-4);
	assert_true(m > 89.0 && m < 91.0);
	assert_true(kg_inputs_large_mean_for(KG_F32, 1e-6, 1e-4) == m);
	assert_true(kg_inputs_large_mean_for(KG_F16, 1e-2, 1e-2) == kg_inputs_large_mean_lo(KG_F16));
	assert_true(kg_inputs_large_mean_for(KG_F32, 0, 0) == 16.0);
	enum { R = 16, C = 1000 };
	const int64_t shape[2] = {R, C};
	float *a = malloc(R * C * sizeof(float));
	assert_non_null(a);
	for (uint32_t seed = 1; seed <= 6; seed++) {
		kg_key k = key_of(seed);
		struct kg_gen_tensor t;
		kg_inputs_params(&t, KG_F32, R * C, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_LARGE_MEAN, KG_CLASS_ALL, &k, 0);
		kg_inputs_size_large_mean(&t, m);
		kg_inputs_fill_tensor(a, &t, &k);
		double s = 0, s2 = 0;
		for (int i = 0; i < R * C; i++)
			s += a[i];
		double mean = s / (R * C);
		for (int i = 0; i < R * C; i++)
			s2 += (a[i] - mean) * (a[i] - mean);
		if (!(fabs(mean) >= m - 0.1 && fabs(mean) < 2 * m + 0.1 && fabs(sqrt(s2 / (R * C)) - 1.0) < 0.05))
			fail_msg("seed %u: mean %g, spread %g (lo %g)", seed, mean, sqrt(s2 / (R * C)), m);
		/* a normal draw is not moved */
		kg_inputs_params(&t, KG_F32, R * C, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, KG_CLASS_ALL, &k, 0);
		double off = t.offset;
		kg_inputs_size_large_mean(&t, m);
		assert_true(t.offset == off);
	}
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_core_matches_fill),
		cmocka_unit_test(test_variance_role),
		cmocka_unit_test(test_large_mean_sized),
		cmocka_unit_test(test_core_subranges),
		cmocka_unit_test(test_core_exp_log),
		cmocka_unit_test(test_core_normal_moments),
		cmocka_unit_test(test_core_valid),
		cmocka_unit_test(test_bool_and_many_tensors),
		cmocka_unit_test(test_spiked),
		cmocka_unit_test(test_mixed),
		cmocka_unit_test(test_seeded_classes_differ),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
