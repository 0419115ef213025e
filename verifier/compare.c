/* Tolerance comparison. The rules for non-finite values are strict on purpose: a NaN where the
 * reference has a number is always a failure, whatever the tolerance. */
#include "verifier/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "verifier/dtype.h"

int kg_compare(const void *got, const void *exp, kg_dtype dt, size_t n, double atol, double rtol, struct kg_cmp *r)
{
	memset(r, 0, sizeof(*r));
	r->first_bad = r->first_nan = r->max_abs_idx = r->max_rel_idx = -1;
	r->n = (int64_t)n;
	for (size_t i = 0; i < n; i++) {
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
	return r->n_bad ? 1 : 0;
}

void kg_index_str(int64_t flat, const int64_t *shape, int ndim, char *out, size_t outsz)
{
	int64_t idx[KG_MAX_DIMS];
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
