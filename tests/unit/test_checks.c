/* The pure checks on crafted buffers: a canary hit at a given offset on either side, an input
 * changed at one element, an unwritten index, NaN and plain mismatches, stale results, a constant
 * and a copied output, a degenerate reference, a late write, a device tail; and the tolerance
 * model through the output check: long fp32 sums pass, zeros, constants and fp16 do not. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "verifier/arena/arena.h"
#include "verifier/judge/checks.h"
#include "verifier/plan/dtype.h"

#define N 64 /* elements per tensor: x (input) and y (output), f32 */

struct fixture {
	struct kg_arena a;
	float shadow[N], ref[N];
	const void *shadow_p[1], *ref_p[1];
	struct kg_tol tol[1];
	struct kg_cmp cmp[1];
	const char *names[2];
	struct kg_view v;
};

static float *x_of(struct fixture *f)
{
	return kg_arena_ptr(&f->a, 0);
}

static float *y_of(struct fixture *f)
{
	return kg_arena_ptr(&f->a, 1);
}

/* An arena laid out for x and y, canaries keyed, y poisoned, x = shadow, y = ref: a clean call. */
static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	kg_error e = {0};
	const kg_dtype dt[2] = {KG_F32, KG_F32};
	const int nd[2] = {1, 1};
	const int64_t shp[2][KG_MAX_DIMS] = {{N}, {N}};
	uint64_t bytes[2] = {N * 4, N * 4};
	assert_int_equal(kg_arena_create(&f->a, kg_arena_size_for(bytes, 2), &e), 0);
	assert_int_equal(kg_arena_layout(&f->a, 0, 0, 1, 1, dt, nd, shp, &e), 0);
	kg_arena_canary_fill(&f->a, 0x1234);
	kg_arena_poison(&f->a, 77);
	for (int i = 0; i < N; i++) {
		f->shadow[i] = (float)i - 10.5f;
		f->ref[i] = 1.0f + (float)i / 8;
	}
	memcpy(x_of(f), f->shadow, sizeof(f->shadow));
	memcpy(y_of(f), f->ref, sizeof(f->ref));
	f->shadow_p[0] = f->shadow;
	f->ref_p[0] = f->ref;
	f->tol[0] = (struct kg_tol){.atol = 1e-6, .rtol = 1e-5};
	f->names[0] = "x";
	f->names[1] = "y";
	f->v = (struct kg_view){.arena = &f->a, .names = f->names, .shadow = f->shadow_p, .ref = f->ref_p,
				.tol = f->tol, .cmp = f->cmp};
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	kg_arena_destroy(&f->a);
	free(f);
	return 0;
}

static void test_clean_call_has_no_findings(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	struct kg_shortcut_state st = {0};
	assert_int_equal(kg_check_canaries(&f->v, &out), 0);
	assert_int_equal(kg_check_inputs(&f->v, &out), 0);
	assert_int_equal(kg_check_unwritten(&f->v, &out), 0);
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 0);
	assert_int_equal(kg_check_shortcuts(&f->v, 0, &st, &out), 0);
	assert_int_equal(kg_check_tail(100000, 1000000, &out), 0);
	assert_int_equal(out.n, 0);
}

static void test_canary_after_and_before(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	unsigned char *y = (unsigned char *)y_of(f);
	y[N * 4 + 5] ^= 0xff; /* six bytes past y's end */
	assert_int_equal(kg_check_canaries(&f->v, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_CANARY);
	assert_int_equal(out.f[0].slot, 1);
	assert_int_equal(out.f[0].index, 5);
	assert_non_null(strstr(out.f[0].msg, "after 'y'"));
	assert_non_null(strstr(out.f[0].msg, "5 bytes past its end"));
	y[N * 4 + 5] ^= 0xff;
	/* the byte right in front of x */
	unsigned char *x = (unsigned char *)x_of(f);
	x[-1] ^= 1;
	out.n = 0;
	assert_int_equal(kg_check_canaries(&f->v, &out), 1);
	assert_int_equal(out.f[0].slot, 0);
	assert_int_equal(out.f[0].index, 0);
	assert_non_null(strstr(out.f[0].msg, "before 'x'"));
	/* a write restored before the check is no finding: keyed bytes, compared all */
	x[-1] ^= 1;
	out.n = 0;
	assert_int_equal(kg_check_canaries(&f->v, &out), 0);
}

static void test_input_modified_at_index(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	x_of(f)[37] = 0.0f;
	assert_int_equal(kg_check_inputs(&f->v, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_INPUT_MODIFIED);
	assert_int_equal(out.f[0].index, 37);
	assert_true(out.f[0].has_values);
	assert_float_equal(out.f[0].expected, 26.5, 0);
	assert_float_equal(out.f[0].got, 0.0, 0);
}

static void test_unwritten_index(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	kg_arena_poison(&f->a, 99);
	for (int i = 0; i < N; i++)
		if (i != 17)
			y_of(f)[i] = f->ref[i];
	assert_int_equal(kg_check_unwritten(&f->v, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_UNWRITTEN_OUTPUT);
	assert_int_equal(out.f[0].slot, 1);
	assert_int_equal(out.f[0].index, 17);
	/* the poison is NaN: the comparison sees it too, as a NaN where a number was due */
	out.n = 0;
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_NAN);
	assert_int_equal(out.f[0].index, 17);
}

static void test_nan_pattern_and_mismatch(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	/* first wrong element is a number: a mismatch, even with a NaN further on */
	y_of(f)[3] = 100.0f;
	y_of(f)[40] = NAN;
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_MISMATCH);
	assert_int_equal(out.f[0].index, 3);
	assert_float_equal(out.f[0].got, 100.0, 0);
	assert_non_null(strstr(out.f[0].msg, "2 of 64 elements"));
	/* first wrong element is NaN: check.nan */
	y_of(f)[3] = f->ref[3];
	y_of(f)[2] = NAN;
	out.n = 0;
	kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out);
	assert_int_equal(out.f[0].code, KG_R_CHECK_NAN);
	assert_int_equal(out.f[0].index, 2);
	/* timed calls name a wrong result stale, NaN or not */
	out.n = 0;
	kg_check_outputs(&f->v, KG_R_CHECK_STALE_RESULT, &out);
	assert_int_equal(out.f[0].code, KG_R_CHECK_STALE_RESULT);
	/* within tolerance is no finding */
	memcpy(y_of(f), f->ref, sizeof(f->ref));
	y_of(f)[5] = f->ref[5] * (1 + 5e-6f);
	out.n = 0;
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 0);
}

static void test_constant_and_passthrough(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	struct kg_shortcut_state st = {0};
	/* a wrong constant output, twice, for different inputs */
	for (int i = 0; i < N; i++)
		y_of(f)[i] = 0.25f;
	assert_int_equal(kg_check_shortcuts(&f->v, 1, &st, &out), 0); /* nothing to compare with yet */
	f->shadow[0] += 1.0f;
	assert_int_equal(kg_check_shortcuts(&f->v, 1, &st, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_CONSTANT_OUTPUT);
	/* the same output for the same inputs is no finding (a deterministic kernel) */
	out.n = 0;
	assert_int_equal(kg_check_shortcuts(&f->v, 1, &st, &out), 0);
	/* an output that stays the same while it is right is no shortcut (it may not depend on what
	 * changed); only a wrong one, in this call or the one before, is asked about */
	struct kg_shortcut_state right = {0};
	assert_int_equal(kg_check_shortcuts(&f->v, 0, &right, &out), 0);
	f->shadow[1] += 1.0f;
	assert_int_equal(kg_check_shortcuts(&f->v, 0, &right, &out), 0);
	f->shadow[2] += 1.0f;
	assert_int_equal(kg_check_shortcuts(&f->v, 1, &right, &out), 1);
	/* the output is the input */
	memcpy(y_of(f), f->shadow, sizeof(f->shadow));
	struct kg_shortcut_state fresh = {0};
	out.n = 0;
	assert_int_equal(kg_check_shortcuts(&f->v, 1, &fresh, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_INPUT_PASSTHROUGH);
	assert_non_null(strstr(out.f[0].msg, "copy of input 'x'"));
}

static void test_degenerate_reference(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(kg_check_degenerate(&f->v), 0);
	/* outputs of ~1/C under an absolute tolerance of 1e-3: zero would pass */
	for (int i = 0; i < N; i++)
		f->ref[i] = 1.0f / 65536 * (1 + (float)i / N);
	f->tol[0].atol = 1e-3;
	assert_int_equal(kg_check_degenerate(&f->v), 1);
	/* the same values under a tight tolerance are evidence */
	f->tol[0].atol = 1e-9;
	assert_int_equal(kg_check_degenerate(&f->v), 0);
	/* a constant reference: its mean passes */
	for (int i = 0; i < N; i++)
		f->ref[i] = 3.0f;
	assert_int_equal(kg_check_degenerate(&f->v), 1);
}

/* y[i] = the sum of 4096 terms in [0, 1): the reference in double, the candidate in fp32 one term
 * after the other, as a plain loop does. */
static void long_sums(struct fixture *f)
{
	uint64_t s = 7;
	for (int i = 0; i < N; i++) {
		float acc = 0;
		double dacc = 0;
		double scale = 1.0 + (double)(i % 7); /* outputs of several magnitudes */
		for (int k = 0; k < 4096; k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			float t = (float)((double)(s >> 40) / 16777216.0 * scale);
			acc += t;
			dacc += t;
		}
		f->ref[i] = (float)dacc;
		y_of(f)[i] = acc;
	}
}

static void test_tolerance_model_long_sums(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	long_sums(f);
	/* the softmax task's bounds, widened for a 4096-term reduction under the default policy */
	const struct kg_tol_model m = {.atol = 1e-9, .rtol = 2e-5, .growth = 0.25, .cap = 1.0 / 1024};
	kg_tol_resolve(&m, KG_F32, 4096, kg_rms(f->ref, KG_F32, N), &f->tol[0]);
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 0);
	/* the comparison is left for the report: fp32 noise, far inside the bound */
	assert_true(f->cmp[0].normwise_err > 0 && f->cmp[0].normwise_err < 1e-5);
	assert_true(f->cmp[0].tol_used < 0.5);
	/* such a reference is evidence: no constant passes it */
	assert_int_equal(kg_check_degenerate(&f->v), 0);
	/* zeros: rejected, and the message gives the norm-wise error beside the element-wise ones */
	memset(y_of(f), 0, N * sizeof(float));
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_MISMATCH);
	assert_non_null(strstr(out.f[0].msg, "norm-wise error 1"));
	/* a constant: the reference's mean */
	double mean = 0;
	for (int i = 0; i < N; i++)
		mean += f->ref[i] / N;
	for (int i = 0; i < N; i++)
		y_of(f)[i] = (float)mean;
	out.n = 0;
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 1);
	/* the exact sums cut to fp16's 10 mantissa bits (truncated) */
	for (int i = 0; i < N; i++) {
		uint32_t u;
		memcpy(&u, &f->ref[i], 4);
		u &= ~0x1fffu;
		memcpy(&y_of(f)[i], &u, 4);
	}
	out.n = 0;
	assert_int_equal(kg_check_outputs(&f->v, KG_R_CHECK_MISMATCH, &out), 1);
	assert_true(f->cmp[0].normwise_err > 2e-4);
}

static void test_late_write_and_tail(void **state)
{
	struct fixture *f = *state;
	struct kg_findings out = {0};
	float before[N];
	const void *bp[1] = {before};
	memcpy(before, y_of(f), sizeof(before));
	assert_int_equal(kg_check_unchanged(&f->v, bp, 50, &out), 0);
	y_of(f)[60] = -1.0f;
	assert_int_equal(kg_check_unchanged(&f->v, bp, 50, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_ASYNC_ESCAPE);
	assert_int_equal(out.f[0].index, 60);
	assert_non_null(strstr(out.f[0].msg, "50 ms after"));
	/* a tail within the synchronisation's latency is none; a long one is an escape */
	out.n = 0;
	assert_int_equal(kg_check_tail(250000, 1000000, &out), 0);
	assert_int_equal(kg_check_tail(2000000, 1000000, &out), 1);
	assert_int_equal(out.f[0].code, KG_R_CHECK_ASYNC_ESCAPE);
}

static void test_full_list_keeps_the_newest(void **state)
{
	(void)state;
	struct kg_findings out = {0};
	for (int i = 0; i < KG_MAX_FINDINGS + 5; i++)
		kg_check_tail(10000000, 0, &out);
	assert_int_equal(out.n, KG_MAX_FINDINGS);
	assert_int_equal(out.f[KG_MAX_FINDINGS - 1].code, KG_R_CHECK_ASYNC_ESCAPE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clean_call_has_no_findings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canary_after_and_before, setup, teardown),
		cmocka_unit_test_setup_teardown(test_input_modified_at_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwritten_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nan_pattern_and_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_constant_and_passthrough, setup, teardown),
		cmocka_unit_test_setup_teardown(test_degenerate_reference, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tolerance_model_long_sums, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_write_and_tail, setup, teardown),
		cmocka_unit_test(test_full_list_keeps_the_newest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
