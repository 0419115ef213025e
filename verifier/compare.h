/* The comparison of a candidate's output against the reference: |got-exp| <= atol + rtol*|exp|,
 * with NaN and Inf handled explicitly, and the worst elements located for the report. */
#ifndef KG_COMPARE_H
#define KG_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

struct kg_cmp {
	int64_t n; /* elements compared */
	int64_t n_bad; /* elements outside tolerance, NaN and Inf mismatches included */
	int64_t n_nan; /* got NaN where the reference is not NaN */
	int64_t n_inf; /* Inf mismatches (either side) */
	int64_t first_bad;
	double first_bad_got, first_bad_exp;
	int64_t first_nan;
	int64_t max_abs_idx;
	double max_abs_err, max_abs_got, max_abs_exp;
	int64_t max_rel_idx;
	double max_rel_err;
};

/* Compares n elements. Returns 0 when every element is within tolerance, 1 otherwise. */
int kg_compare(const void *got, const void *exp, kg_dtype dt, size_t n, double atol, double rtol, struct kg_cmp *r);

/* "[3, 17]" for a flat row-major index. */
void kg_index_str(int64_t flat, const int64_t *shape, int ndim, char *out, size_t outsz);

#endif
