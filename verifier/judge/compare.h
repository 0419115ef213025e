/* The comparison of a candidate's output against the reference, and the tolerance model that
 * decides it. An element passes when |got-exp| <= atol + rtol*|exp|, with NaN and Inf handled
 * explicitly; the worst elements and the norm-wise error are kept for the report.
 *
 * The model (policy/SCHEMA.md, tasks/README.md say it for users): for an output whose every
 * element is a reduction over n terms (the manifest's `reduction`), fp32 accumulation can lose up
 * to (n-1)*u (u = 2^-24, the unit roundoff: the classical bound of recursive summation), relative
 * to the magnitude of the summed terms, and honest kernels reach a sizeable fraction of it where
 * their rounding errors are systematic rather than random (a running sum far above its terms, a
 * rescale at every element): the sqrt(n) law of random rounding does not hold there. The
 * magnitude is |exp| for sums of like-signed terms (softmax's denominator) and about RMS(exp) for
 * sums that cancel (a dot product, x - mean), so one growth term g is added to both:
 *   g    = min(growth * n * u, cap)              growth: the policy's tolerance.growth (1/4)
 *   rtol = rtol_task + g
 *   atol = atol_task + (rms_task + g) * RMS(exp) (the RMS over the finite reference elements)
 * rtol_task, atol_task and rms_task are the task's, widened by the policy's precision. The cap
 * (kg_policy_growth_cap, 2^-10 for fp32) stays well below bf16's rounding, so a result rounded to
 * bf16 never passes however long the reduction.
 *
 * RMS(exp) is one number for the whole output; an element whose terms cancel (terms of a few
 * hundred summing to 0.2: a conv over large-mean activations) carries an honest rounding error
 * of order u * sum|terms|, far above RMS(exp) * g. Where the manifest says `terms: abs_inputs`,
 * the trusted reference runs once more on the inputs' absolute values, which gives each element
 * T_i = sum|terms| (exact for sums of products, an upper bound through ReLU and max-pool), and
 * that element's bound gains
 *   gt * T_i, gt = min(KG_TERMS_LAMBDA * sqrt(n+1) * u, cap)
 * the probabilistic bound of Higham and Mary (2019) for n-term fp32 sums (the +1: the products'
 * own rounding). sqrt(n), not n: with n the rigorous worst case would excuse bf16 inputs at
 * n = 4096, the sqrt(n) law keeps them out while honest elements stay far inside (policy/SCHEMA.md
 * gives the measurements: honest fp32 sums reach 4*u*T on random terms at any n and 32*u*T at
 * n = 4096 on terms that are like-signed in halves, 25 % of the bound; TF32-rounded inputs reach
 * 396*u*T and bf16 2936*u*T there). The pass runs only for outputs that failed without it, so an
 * honest kernel pays nothing.
 *
 * Where the manifest says `terms: reference`, the task's reference computes each element's
 * allowance E_i itself (kg_error_terms), in the output's own units, and gt = 1: a normalisation's
 * error follows its condition and, on rows of near-equal values, rounding errors that add up
 * instead of cancelling; only the task knows either (tasks/layernorm/reference.c says how it
 * bounds both). Such an output gets no g at all: g is the stand-in for what a reduction's
 * rounding may do to an element where nothing better is known, and spread over every element it
 * let an approximate 1/std (rsqrt without its Newton step, 1e-4) pass at 65536 terms and more.
 *
 * Where the manifest says `factor: row`, each row (the last dimension) is divided by one
 * reduction of its own (softmax's sum), and an honest kernel's rounding of that reduction is one
 * factor common to the row (the online softmax's 2.7e-4 at 65536 terms), while what each element
 * does alone (an exp, a product) stays a few ulps at any length. So g bounds that factor, not the
 * elements: kg_compare fits each row's factor c (least squares, held within [1 - g, 1 + g]) and
 * judges |got - c*exp| <= atol + rtol*|exp| with the task's rtol and atol alone. An exp whose
 * error varies from element to element (a cubic polynomial, 1.7e-4) passed under g and fails
 * after; a common factor within g passes as before; anything accepted now was accepted before.
 *
 * The report gives each output's effective precision: -log2 of its norm-wise error after the row
 * factors (kg_effective_bits), the bits it kept of fp32's 24. */
#ifndef KG_COMPARE_H
#define KG_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

/* What the task and the policy say about one output before its reference values are seen. */
struct kg_tol_model {
	double atol, rtol, rms; /* the task's, widened by the policy's precision */
	double growth; /* the policy's tolerance.growth, a fraction of n*u; 0 turns the term off */
	double cap; /* the largest growth term the policy's precision allows */
	/* `factor: row`: the output's row length (its last dimension), else 0: g bounds each row's
	 * common factor instead of widening every element */
	int64_t factor_row;
	/* `terms: reference`: the task's kg_error_terms says what each element may be off by, so g
	 * widens no element */
	int reference_terms;
};

/* The tolerance of one output in one trial (growth is 0 where g went into a row's factor or the
 * task's own allowance instead). */
struct kg_tol {
	double atol, rtol;
	double growth; /* g: what the reduction length added to rtol and, times RMS(exp), to atol */
	/* Per element sum|terms| (the reference on |inputs|) or the reference's own allowance
	 * (kg_error_terms), in the output's dtype, or NULL; the bound of element i gains
	 * terms_g * |terms[i]| */
	const void *terms;
	double terms_g;
	/* factor: row: rows of factor_row elements may each be off by one common factor within
	 * factor_cap (g) of 1; kg_compare fits it per row and judges every element after it */
	int64_t factor_row;
	double factor_cap;
};

/* lambda of the term-magnitude bound: the Higham-Mary bound holds with probability at least
 * 1 - 2*exp(-lambda^2/2) for rounding errors of full size u; real ones are uniform in [-u/2, u/2]
 * under round-to-nearest, so 2 is already several standard deviations (measured above) */
#define KG_TERMS_LAMBDA 2.0

/* The unit roundoff of fp32 accumulation, 2^-24: the precision every policy assumes sums keep. */
#define KG_U_FP32 (1.0 / 16777216.0)

/* g for an n-term reduction (n < 2: no reduction, 0). Integer outputs have none either. */
double kg_tol_growth(const struct kg_tol_model *m, kg_dtype dt, int64_t n);
/* The trial's tolerance from the model, the reduction length and the reference output's RMS. */
void kg_tol_resolve(const struct kg_tol_model *m, kg_dtype dt, int64_t n, double ref_rms, struct kg_tol *out);
/* gt for an n-term reduction with term magnitudes (0 where there is no reduction or no float). */
double kg_tol_terms_g(const struct kg_tol_model *m, kg_dtype dt, int64_t n);
/* Root mean square of the finite elements; 0 when there are none. */
double kg_rms(const void *p, kg_dtype dt, size_t n);

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
	/* Norm-wise: ||got-exp|| / ||exp|| over the elements finite on both sides. One number for the
	 * whole output, so a uniform low-precision error shows as plainly as a single bad element. */
	double err_sq, ref_sq;
	double normwise_err; /* 0 when both norms are 0; INFINITY when only the reference's is, or
			      * after any NaN/Inf mismatch */
	/* The same after each row's common factor (factor: row; otherwise equal to normwise_err), the
	 * error the element-wise figures above and the bound judge; its precision in bits,
	 * kg_effective_bits; the largest |factor - 1| taken out of a row (0 without factor: row). */
	double res_sq, normwise_res, effective_bits, factor_max;
	/* The largest |got-exp| / (atol + rtol*|exp|): the share of the tolerance the worst element
	 * used (<= 1 passes; INFINITY for a non-finite mismatch or any error under a zero bound). */
	double tol_used;
	int64_t tol_used_idx;
};

/* The precision a norm-wise error leaves, in bits: -log2(err), 24 (fp32's) at 2^-24 or less, 0
 * for an error of 1 or more and for a non-finite one. */
double kg_effective_bits(double normwise_err);

/* Compares n elements. Returns 0 when every element is within tolerance, 1 otherwise. Under
 * factor: row the element-wise figures (max abs/rel error, tol_used, first_bad) are those after
 * each row's factor. */
int kg_compare(const void *got, const void *exp, kg_dtype dt, size_t n, const struct kg_tol *tol, struct kg_cmp *r);

/* The norm-wise figures and effective bits from r's sums (what kg_compare ends with; for figures
 * summed elsewhere, kgate-device's). */
void kg_cmp_finish(struct kg_cmp *r);

/* "[3, 17]" for a flat row-major index. */
void kg_index_str(int64_t flat, const int64_t *shape, int ndim, char *out, size_t outsz);

#endif
