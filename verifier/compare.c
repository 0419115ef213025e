/* Tolerance model and comparison (compare.h). The rules for non-finite values are strict on
 * purpose: a NaN where the reference has a number is always a failure, whatever the tolerance. */
#include "verifier/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/dtype.h"
#include "verifier/parallel.h"

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
	out->growth = g;
	out->terms = NULL;
	out->terms_g = 0;
	out->rtol = m->rtol + g;
	out->atol = m->atol + (m->rms + g) * (isfinite(ref_rms) ? ref_rms : 0);
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

KG_HOT void compare_range_t(const void *got, const void *exp, kg_dtype dt, size_t lo, size_t hi,
			    const struct kg_tol *tol, struct kg_cmp *r)
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
			double ax = fabs(x), bound = atol + rtol * ax, e = fabs(g - x);
			if (tol->terms)
				bound += tol->terms_g * fabs(kg_load(tol->terms, dt, i));
			if (e <= bound) {
				r->err_sq += e * e;
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
			double bound = atol + rtol * fabs(x);
			if (tol->terms)
				bound += tol->terms_g * fabs(kg_load(tol->terms, dt, i));
			abs_err = fabs(g - x);
			rel_err = abs_err / fmax(fabs(x), 1e-30);
			bad = !(abs_err <= bound);
			used = bound > 0 ? abs_err / bound : abs_err > 0 ? INFINITY : 0;
			r->err_sq += abs_err * abs_err;
			r->ref_sq += x * x;
		}
		if (bad && !(used > 1)) { /* a non-finite mismatch: no norm-wise error can be small */
			used = INFINITY;
			r->err_sq = INFINITY;
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

static void compare_range(const void *got, const void *exp, kg_dtype dt, size_t lo, size_t hi,
			  const struct kg_tol *tol, struct kg_cmp *r)
{
	if (dt == KG_F32)
		compare_range_t(got, exp, KG_F32, lo, hi, tol, r);
	else
		compare_range_t(got, exp, dt, lo, hi, tol, r);
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
	compare_range(j->got, j->exp, j->dt, lo, hi, j->tol, &j->part[part]);
}

/* Parts come in index order, so "first" and tie-breaking "max" merge exactly as one pass would. */
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
	r->ref_sq += p->ref_sq;
}

static void finish(struct kg_cmp *r)
{
	r->normwise_err = r->ref_sq > 0 ? sqrt(r->err_sq / r->ref_sq) : r->err_sq > 0 ? INFINITY : 0;
}

int kg_compare(const void *got, const void *exp, kg_dtype dt, size_t n, const struct kg_tol *tol, struct kg_cmp *r)
{
	struct cmp_job *j = malloc(sizeof(*j));
	if (!j) {
		compare_range(got, exp, dt, 0, n, tol, r);
		finish(r);
		return r->n_bad ? 1 : 0;
	}
	*j = (struct cmp_job){.got = got, .exp = exp, .dt = dt, .tol = tol};
	int parts = kg_parallel_for(n, 1u << 20, cmp_part, j);
	memset(r, 0, sizeof(*r));
	r->first_bad = r->first_nan = r->max_abs_idx = r->max_rel_idx = r->tol_used_idx = -1;
	for (int i = 0; i < parts; i++)
		merge(r, &j->part[i]);
	finish(r);
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
