/* Tolerance model and comparison (compare.h). The rules for non-finite values are strict on
 * purpose: a NaN where the reference has a number is always a failure, whatever the tolerance. */
#include "verifier/judge/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/dtype.h"
#include "verifier/plan/parallel.h"

double kg_tol_growth(const struct kg_tol_model *m, kg_dtype dt, int64_t n)
{
	/* integer arithmetic is exact: a reduction adds nothing there */
	if (n < 2 || m->growth <= 0 || !kg_dtype_is_float(dt))
		return 0;
	double g = m->growth * KG_U_FP32 * (double)n;
	return g < m->cap ? g : m->cap;
}

double kg_tol_terms_g(const struct kg_tol_model *m, kg_dtype dt, int64_t n)
{
	if (n < 2 || m->growth <= 0 || !kg_dtype_is_float(dt))
		return 0;
	double g = KG_TERMS_LAMBDA * sqrt((double)n + 1) * KG_U_FP32;
	return g < m->cap ? g : m->cap;
}

void kg_tol_resolve(const struct kg_tol_model *m, kg_dtype dt, int64_t n, double ref_rms, struct kg_tol *out)
{
	double g = kg_tol_growth(m, dt, n);
	/* g widens every element only where nothing better says where a reduction's error goes: a
	 * row's common factor (factor: row) takes it whole, a task's own allowance (terms: reference)
	 * replaces it */
	int factored = m->factor_row > 0 && g > 0;
	double ge = factored || m->reference_terms ? 0 : g;
	out->growth = ge;
	out->terms = NULL;
	out->terms_g = 0;
	out->factor_row = factored ? m->factor_row : 0;
	out->factor_cap = factored ? g : 0;
	out->rtol = m->rtol + ge;
	out->atol = m->atol + (m->rms + ge) * (isfinite(ref_rms) ? ref_rms : 0);
}

struct rms_job {
	const void *p;
	kg_dtype dt;
	double ss[KG_PAR_MAX_PARTS];
	int64_t k[KG_PAR_MAX_PARTS];
};

/* Passes over whole tensors are written once for every dtype and compiled twice (KG_HOT): for
 * fp32, the dtype of nearly every output, and for the rest. */
KG_HOT void rms_range(const void *p, kg_dtype dt, size_t lo, size_t hi, double *ss_out, int64_t *k_out)
{
	double ss = 0;
	int64_t k = 0;
	for (size_t i = lo; i < hi; i++) {
		double x = kg_load(p, dt, i);
		if (isfinite(x)) {
			ss += x * x;
			k++;
		}
	}
	*ss_out = ss;
	*k_out = k;
}

static void rms_part(void *arg, int part, size_t lo, size_t hi)
{
	struct rms_job *j = arg;
	if (j->dt == KG_F32)
		rms_range(j->p, KG_F32, lo, hi, &j->ss[part], &j->k[part]);
	else
		rms_range(j->p, j->dt, lo, hi, &j->ss[part], &j->k[part]);
}

double kg_rms(const void *p, kg_dtype dt, size_t n)
{
	struct rms_job j = {.p = p, .dt = dt};
	int parts = kg_parallel_for(n, 1u << 20, rms_part, &j);
	double ss = 0;
	int64_t k = 0;
	for (int i = 0; i < parts; i++) { /* in part order: the same sum for any thread count */
		ss += j.ss[i];
		k += j.k[i];
	}
	return k ? sqrt(ss / (double)k) : 0;
}

/* c: the factor the reference's elements are multiplied by before they are compared (the row's
 * common factor under factor: row, else 1); the bound is always the reference's own. */
KG_HOT void compare_range_t(const void *got, const void *exp, kg_dtype dt, size_t lo, size_t hi,
			    const struct kg_tol *tol, double c, struct kg_cmp *r)
{
	const double atol = tol->atol, rtol = tol->rtol;
	memset(r, 0, sizeof(*r));
	r->first_bad = r->first_nan = r->max_abs_idx = r->max_rel_idx = r->tol_used_idx = -1;
	r->n = (int64_t)(hi - lo);
	for (size_t i = lo; i < hi; i++) {
		double g = kg_load(got, dt, i), x = kg_load(exp, dt, i);
		/* The common case, both finite and within the bound, without a division: the running
		 * maxima are compared as products (abs_err > max_rel * |x| rather than a quotient). */
		if (__builtin_expect(isfinite(g) && isfinite(x) && r->tol_used_idx >= 0, 1)) {
			double ax = fabs(x), bound = atol + rtol * ax, e = fabs(g - c * x), raw = fabs(g - x);
			if (tol->terms)
				bound += tol->terms_g * fabs(kg_load(tol->terms, dt, i));
			if (e <= bound) {
				r->err_sq += raw * raw;
				r->res_sq += e * e;
				r->ref_sq += x * x;
				if (e > r->max_abs_err) {
					r->max_abs_err = e;
					r->max_abs_idx = (int64_t)i;
					r->max_abs_got = g;
					r->max_abs_exp = x;
				}
				double den = fmax(ax, 1e-30);
				if (e > r->max_rel_err * den) {
					r->max_rel_err = e / den;
					r->max_rel_idx = (int64_t)i;
				}
				if (bound > 0 && e > r->tol_used * bound) {
					r->tol_used = e / bound;
					r->tol_used_idx = (int64_t)i;
				}
				continue;
			}
		}
		int bad;
		double abs_err = 0, rel_err = 0, used = 0;
		if (isnan(x)) {
			bad = !isnan(g);
			if (bad)
				abs_err = rel_err = INFINITY;
		} else if (isnan(g)) {
			bad = 1;
			r->n_nan++;
			if (r->first_nan < 0)
				r->first_nan = (int64_t)i;
			abs_err = rel_err = INFINITY;
		} else if (isinf(x) || isinf(g)) {
			bad = g != x;
			if (bad) {
				r->n_inf++;
				abs_err = rel_err = INFINITY;
			}
		} else {
			double bound = atol + rtol * fabs(x), raw = fabs(g - x);
			if (tol->terms)
				bound += tol->terms_g * fabs(kg_load(tol->terms, dt, i));
			abs_err = fabs(g - c * x);
			rel_err = abs_err / fmax(fabs(x), 1e-30);
			bad = !(abs_err <= bound);
			used = bound > 0 ? abs_err / bound : abs_err > 0 ? INFINITY : 0;
			r->err_sq += raw * raw;
			r->res_sq += abs_err * abs_err;
			r->ref_sq += x * x;
		}
		if (bad && !(used > 1)) { /* a non-finite mismatch: no norm-wise error can be small */
			used = INFINITY;
			r->err_sq = r->res_sq = INFINITY;
		}
		if (used > r->tol_used || r->tol_used_idx < 0) {
			r->tol_used = used;
			r->tol_used_idx = (int64_t)i;
		}
		if (bad) {
			if (r->first_bad < 0) {
				r->first_bad = (int64_t)i;
				r->first_bad_got = g;
				r->first_bad_exp = x;
			}
			r->n_bad++;
		}
		if (abs_err > r->max_abs_err || r->max_abs_idx < 0) {
			r->max_abs_err = abs_err;
			r->max_abs_idx = (int64_t)i;
			r->max_abs_got = g;
			r->max_abs_exp = x;
		}
		if (rel_err > r->max_rel_err || r->max_rel_idx < 0) {
			r->max_rel_err = rel_err;
			r->max_rel_idx = (int64_t)i;
		}
	}
}

/* Parts come in index order, so "first" and tie-breaking "max" merge exactly as one pass would. */
static void merge(struct kg_cmp *r, const struct kg_cmp *p);

/* fp32 with no per-element terms, the common case, on x86-64 with AVX2: blocks of FAST_BLOCK
 * elements in one branch-free pass over vectors of four doubles, which says whether every element
 * is finite and within its bound and gives the block's sums and maxima (the relative error and the
 * share of the bound kept as fractions, compared by products: no division per element). A block
 * where any element is not goes through compare_range_t; where a maximum beats the running one,
 * the block is read again for its first index, as one scalar pass would pick. 67M elements on 2
 * cores: 0.056 s against 0.27 s for the scalar pass. Elsewhere the scalar pass (generic vectors
 * without AVX were measured slower than it). */
#if defined(__x86_64__) && defined(__GNUC__)
#define KG_FAST_COMPARE 1
#define FAST_BLOCK 2048
#define LANES 4
typedef double v4d __attribute__((vector_size(8 * LANES)));
typedef int64_t v4l __attribute__((vector_size(8 * LANES)));
typedef float v4f __attribute__((vector_size(4 * LANES)));

/* lane-wise m ? a : b, and a > b ? a : b (macros: outside a target("avx2") function, one taking
 * these would change the ABI) */
#define VSEL(m, a, b) ((v4d)(((v4l)(a) & (m)) | ((v4l)(b) & ~(m))))
#define VMAX(a, b) VSEL((a) > (b), a, b)

static double hmax(const v4d *a)
{
	double m = (*a)[0];
	for (int k = 1; k < LANES; k++)
		m = (*a)[k] > m ? (*a)[k] : m;
	return m;
}

/* the first index in [lo, hi) whose value of what (0: abs error, 1: relative, 2: share of the
 * bound) equals m */
static size_t first_at(const float *g, const float *x, size_t lo, size_t hi, double atol, double rtol, double c,
		       int what, double m)
{
	for (size_t i = lo; i < hi; i++) {
		double ax = fabs((double)x[i]), e = fabs((double)g[i] - c * (double)x[i]), b = atol + rtol * ax;
		double v = what == 0 ? e : what == 1 ? e / (ax > 1e-30 ? ax : 1e-30) : b > 0 ? e / b : 0;
		if (v == m)
			return i;
	}
	return lo;
}

__attribute__((target("avx2"))) static void compare_range_f32(const float *g, const float *x, size_t lo, size_t hi,
							      const struct kg_tol *tol, double c, struct kg_cmp *r)
{
	const double atol = tol->atol, rtol = tol->rtol;
	const v4d va = (v4d){0} + atol, vr = (v4d){0} + rtol, tiny = (v4d){0} + 1e-30, zero = {0};
	const v4d vc = (v4d){0} + c;
	const v4d one = (v4d){0} + 1;
	const v4l sign = (v4l){0} + INT64_MAX;
	memset(r, 0, sizeof(*r));
	r->first_bad = r->first_nan = r->max_abs_idx = r->max_rel_idx = r->tol_used_idx = -1;
	for (size_t b0 = lo; b0 < hi; b0 += FAST_BLOCK) {
		size_t b1 = b0 + FAST_BLOCK < hi ? b0 + FAST_BLOCK : hi;
		struct kg_cmp blk;
		if (b1 - b0 < FAST_BLOCK) { /* a short tail: one scalar pass */
			compare_range_t(g, x, KG_F32, b0, b1, tol, c, &blk);
			merge(r, &blk);
			continue;
		}
		v4d se = zero, sr = zero, sx = zero, me = zero, mr_n = zero, mr_d = one, mu_n = zero, mu_d = one;
		v4l ok = ~(v4l){0};
		for (size_t i = b0; i < b1; i += LANES) {
			v4f gf, xf;
			memcpy(&gf, g + i, sizeof(gf));
			memcpy(&xf, x + i, sizeof(xf));
			v4d gd = __builtin_convertvector(gf, v4d), xd = __builtin_convertvector(xf, v4d);
			v4d e = (v4d)((v4l)(gd - vc * xd) & sign), ax = (v4d)((v4l)xd & sign);
			v4d raw = gd - xd;
			v4d bound = va + vr * ax;
			ok &= e <= bound; /* false for NaN on either side, and for Inf mismatches */
			se += raw * raw;
			sr += e * e;
			sx += xd * xd;
			/* the relative error and the share of the bound as fractions, compared by products:
			 * no division per element */
			v4d den = VMAX(ax, tiny);
			v4l take = e * mr_d > mr_n * den;
			mr_n = VSEL(take, e, mr_n);
			mr_d = VSEL(take, den, mr_d);
			take = (e * mu_d > mu_n * bound) & (bound > zero);
			mu_n = VSEL(take, e, mu_n);
			mu_d = VSEL(take, bound, mu_d);
			me = VMAX(e, me);
		}
		int all = 1;
		for (int k = 0; k < LANES; k++)
			all &= ok[k] != 0;
		if (!all) {
			compare_range_t(g, x, KG_F32, b0, b1, tol, c, &blk);
			merge(r, &blk);
			continue;
		}
		memset(&blk, 0, sizeof(blk));
		blk.n = (int64_t)(b1 - b0);
		blk.first_bad = blk.first_nan = -1;
		blk.err_sq = blk.res_sq = blk.ref_sq = 0;
		for (int k = 0; k < LANES; k++) {
			blk.err_sq += se[k];
			blk.res_sq += sr[k];
			blk.ref_sq += sx[k];
		}
		blk.max_abs_err = hmax(&me);
		v4d mr = mr_n / mr_d, mu = mu_n / mu_d;
		blk.max_rel_err = hmax(&mr);
		blk.tol_used = hmax(&mu);
		/* an index only where merge takes this block's maximum (the first block, or a new one) */
		blk.max_abs_idx = blk.max_rel_idx = blk.tol_used_idx = (int64_t)b0;
		if (r->max_abs_idx < 0 || blk.max_abs_err > r->max_abs_err) {
			size_t i = first_at(g, x, b0, b1, atol, rtol, c, 0, blk.max_abs_err);
			blk.max_abs_idx = (int64_t)i;
			blk.max_abs_got = g[i];
			blk.max_abs_exp = x[i];
		}
		if (r->max_rel_idx < 0 || blk.max_rel_err > r->max_rel_err)
			blk.max_rel_idx = (int64_t)first_at(g, x, b0, b1, atol, rtol, c, 1, blk.max_rel_err);
		if (r->tol_used_idx < 0 || blk.tol_used > r->tol_used)
			blk.tol_used_idx = (int64_t)first_at(g, x, b0, b1, atol, rtol, c, 2, blk.tol_used);
		merge(r, &blk);
	}
}

#endif

static void compare_range(const void *got, const void *exp, kg_dtype dt, size_t lo, size_t hi,
			  const struct kg_tol *tol, double c, struct kg_cmp *r)
{
#ifdef KG_FAST_COMPARE
	if (dt == KG_F32 && !tol->terms && __builtin_cpu_supports("avx2")) {
		compare_range_f32(got, exp, lo, hi, tol, c, r);
		return;
	}
#endif
	if (dt == KG_F32)
		compare_range_t(got, exp, KG_F32, lo, hi, tol, c, r);
	else
		compare_range_t(got, exp, dt, lo, hi, tol, c, r);
}

/* The factor that best explains a row of the reference as the candidate's (least squares over
 * the pairs finite on both sides: sum g*x / sum x*x, so the large elements that carry the row
 * decide), held within cap of 1: what is beyond the cap stays in every element's error. 1 for a
 * row with nothing to fit. */
KG_HOT double row_factor_t(const void *got, const void *exp, kg_dtype dt, size_t lo, size_t hi, double cap)
{
	double gx = 0, xx = 0;
	for (size_t i = lo; i < hi; i++) {
		double g = kg_load(got, dt, i), x = kg_load(exp, dt, i);
		if (isfinite(g) && isfinite(x)) {
			gx += g * x;
			xx += x * x;
		}
	}
	double c = xx > 0 ? gx / xx : 1.0;
	if (!isfinite(c))
		return 1.0;
	return c < 1.0 - cap ? 1.0 - cap : c > 1.0 + cap ? 1.0 + cap : c;
}

struct cmp_job {
	const void *got, *exp;
	kg_dtype dt;
	const struct kg_tol *tol;
	struct kg_cmp part[KG_PAR_MAX_PARTS];
};

static void cmp_part(void *arg, int part, size_t lo, size_t hi)
{
	struct cmp_job *j = arg;
	compare_range(j->got, j->exp, j->dt, lo, hi, j->tol, 1.0, &j->part[part]);
}

static void init_cmp(struct kg_cmp *r)
{
	memset(r, 0, sizeof(*r));
	r->first_bad = r->first_nan = r->max_abs_idx = r->max_rel_idx = r->tol_used_idx = -1;
}

/* factor: row: parts are whole rows (lo, hi count rows); each row's factor is fitted, then its
 * elements compared against the scaled reference. */
static void cmp_rows_part(void *arg, int part, size_t lo, size_t hi)
{
	struct cmp_job *j = arg;
	struct kg_cmp *r = &j->part[part], blk;
	size_t len = (size_t)j->tol->factor_row;
	init_cmp(r);
	for (size_t row = lo; row < hi; row++) {
		size_t a = row * len, b = a + len;
		double c = j->dt == KG_F32 ? row_factor_t(j->got, j->exp, KG_F32, a, b, j->tol->factor_cap)
					   : row_factor_t(j->got, j->exp, j->dt, a, b, j->tol->factor_cap);
		compare_range(j->got, j->exp, j->dt, a, b, j->tol, c, &blk);
		blk.factor_max = fabs(c - 1.0);
		merge(r, &blk);
	}
}

static void merge(struct kg_cmp *r, const struct kg_cmp *p)
{
	r->n += p->n;
	r->n_bad += p->n_bad;
	r->n_nan += p->n_nan;
	r->n_inf += p->n_inf;
	if (r->first_bad < 0 && p->first_bad >= 0) {
		r->first_bad = p->first_bad;
		r->first_bad_got = p->first_bad_got;
		r->first_bad_exp = p->first_bad_exp;
	}
	if (r->first_nan < 0)
		r->first_nan = p->first_nan;
	if (p->max_abs_idx >= 0 && (r->max_abs_idx < 0 || p->max_abs_err > r->max_abs_err)) {
		r->max_abs_err = p->max_abs_err;
		r->max_abs_idx = p->max_abs_idx;
		r->max_abs_got = p->max_abs_got;
		r->max_abs_exp = p->max_abs_exp;
	}
	if (p->max_rel_idx >= 0 && (r->max_rel_idx < 0 || p->max_rel_err > r->max_rel_err)) {
		r->max_rel_err = p->max_rel_err;
		r->max_rel_idx = p->max_rel_idx;
	}
	if (p->tol_used_idx >= 0 && (r->tol_used_idx < 0 || p->tol_used > r->tol_used)) {
		r->tol_used = p->tol_used;
		r->tol_used_idx = p->tol_used_idx;
	}
	r->err_sq += p->err_sq;
	r->res_sq += p->res_sq;
	r->ref_sq += p->ref_sq;
	r->factor_max = fmax(r->factor_max, p->factor_max);
}

static double normwise(double err_sq, double ref_sq)
{
	return ref_sq > 0 ? sqrt(err_sq / ref_sq) : err_sq > 0 ? INFINITY : 0;
}

void kg_cmp_finish(struct kg_cmp *r)
{
	r->normwise_err = normwise(r->err_sq, r->ref_sq);
	r->normwise_res = normwise(r->res_sq, r->ref_sq);
	r->effective_bits = kg_effective_bits(r->normwise_res);
}

double kg_effective_bits(double normwise_res)
{
	if (!(normwise_res >= 0) || isinf(normwise_res))
		return 0;
	if (normwise_res <= KG_U_FP32)
		return 24;
	double b = -log2(normwise_res);
	return b > 0 ? b : 0;
}

int kg_compare(const void *got, const void *exp, kg_dtype dt, size_t n, const struct kg_tol *tol, struct kg_cmp *r)
{
	int64_t len = tol->factor_row;
	int rows = len > 0 && kg_dtype_is_float(dt) && n % (size_t)len == 0;
	struct cmp_job *j = malloc(sizeof(*j));
	if (!j) {
		init_cmp(r);
		struct cmp_job one = {.got = got, .exp = exp, .dt = dt, .tol = tol};
		if (rows)
			cmp_rows_part(&one, 0, 0, n / (size_t)len); /* one.part[0] only: the job is small */
		else
			compare_range(got, exp, dt, 0, n, tol, 1.0, &one.part[0]);
		*r = one.part[0];
		kg_cmp_finish(r);
		return r->n_bad ? 1 : 0;
	}
	*j = (struct cmp_job){.got = got, .exp = exp, .dt = dt, .tol = tol};
	int parts = rows ? kg_parallel_for(n / (size_t)len, ((1u << 20) + (size_t)len - 1) / (size_t)len, cmp_rows_part, j)
			 : kg_parallel_for(n, 1u << 20, cmp_part, j);
	init_cmp(r);
	for (int i = 0; i < parts; i++)
		merge(r, &j->part[i]);
	kg_cmp_finish(r);
	free(j);
	return r->n_bad ? 1 : 0;
}

void kg_index_str(int64_t flat, const int64_t *shape, int ndim, char *out, size_t outsz)
{
	int64_t idx[KG_MAX_DIMS] = {0};
	for (int d = ndim - 1; d >= 0; d--) {
		idx[d] = shape[d] ? flat % shape[d] : 0;
		flat = shape[d] ? flat / shape[d] : 0;
	}
	size_t len = (size_t)snprintf(out, outsz, "[");
	for (int d = 0; d < ndim && len < outsz; d++)
		len += (size_t)snprintf(out + len, outsz - len, "%s%lld", d ? ", " : "", (long long)idx[d]);
	if (len < outsz)
		snprintf(out + len, outsz - len, "]");
}
