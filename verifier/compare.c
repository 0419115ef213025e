/* Tolerance comparison. The rules for non-finite values are strict on purpose: a NaN where the
 * reference has a number is always a failure, whatever the tolerance. */
#include "verifier/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/dtype.h"
#include "verifier/parallel.h"

static void compare_range(const void *got, const void *exp, kg_dtype dt, size_t lo, size_t hi, double atol,
			  double rtol, struct kg_cmp *r)
{
	memset(r, 0, sizeof(*r));
	r->first_bad = r->first_nan = r->max_abs_idx = r->max_rel_idx = -1;
	r->n = (int64_t)(hi - lo);
	for (size_t i = lo; i < hi; i++) {
		double g = kg_load(got, dt, i), x = kg_load(exp, dt, i);
		int bad;
		double abs_err = 0, rel_err = 0;
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
			abs_err = fabs(g - x);
			rel_err = abs_err / fmax(fabs(x), 1e-30);
			bad = !(abs_err <= atol + rtol * fabs(x));
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

struct cmp_job {
	const void *got, *exp;
	kg_dtype dt;
	double atol, rtol;
	struct kg_cmp part[KG_PAR_MAX_PARTS];
};

static void cmp_part(void *arg, int part, size_t lo, size_t hi)
{
	struct cmp_job *j = arg;
	compare_range(j->got, j->exp, j->dt, lo, hi, j->atol, j->rtol, &j->part[part]);
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
}

int kg_compare(const void *got, const void *exp, kg_dtype dt, size_t n, double atol, double rtol, struct kg_cmp *r)
{
	struct cmp_job *j = malloc(sizeof(*j));
	if (!j) {
		compare_range(got, exp, dt, 0, n, atol, rtol, r);
		return r->n_bad ? 1 : 0;
	}
	*j = (struct cmp_job){.got = got, .exp = exp, .dt = dt, .atol = atol, .rtol = rtol};
	int parts = kg_parallel_for(n, 1u << 20, cmp_part, j);
	memset(r, 0, sizeof(*r));
	r->first_bad = r->first_nan = r->max_abs_idx = r->max_rel_idx = -1;
	for (int i = 0; i < parts; i++)
		merge(r, &j->part[i]);
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
