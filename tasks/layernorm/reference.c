/* Trusted CPU reference for LayerNorm over the trailing dimensions: two passes in double
 * (mean, then centred variance), biased variance, eps 1e-5, as torch.nn.LayerNorm; and each output
 * element's allowance (kg_error_terms, the manifest's `terms: reference`). */
#include <kgate/kernel.h>
#include <math.h>

KG_CANDIDATE;

/* A row's mean, biased variance and mean |x|, in double, two passes. */
static void moments(const float *x, int64_t n, double *mean, double *var, double *mabs)
{
	double m = 0, a = 0, v = 0;
	for (int64_t i = 0; i < n; i++) {
		m += x[i];
		a += fabs((double)x[i]);
	}
	m /= (double)n;
	for (int64_t i = 0; i < n; i++)
		v += ((double)x[i] - m) * ((double)x[i] - m);
	*mean = m;
	*var = v / (double)n;
	*mabs = a / (double)n;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 3 || n_out != 1 || in[0].ndim != 4)
		return -22;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0];
	int64_t n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double mean, var, mabs;
		moments(xr, n, &mean, &var, &mabs);
		double inv = 1.0 / sqrt(var + 1e-5);
		for (int64_t i = 0; i < n; i++)
			yr[i] = (float)(((double)xr[i] - mean) * inv * w[i] + b[i]);
	}
	return 0;
}

/* Plain fp32 orders of a row's sum, the ways honest kernels add: runs of `run` elements, each
 * summed in sequence by `acc` interleaved accumulators (added at the run's end), backwards if rev,
 * the runs' sums added in sequence. One accumulator over 2^16 (the longest run an honest one makes,
 * kg_error_terms says why), two interleaved, chunks of 16384 (a thread's share), reversed chunks
 * of 4096. On a row of random values their errors are alike and small; where rounding is
 * correlated (near-duplicate rows, rows of a few repeated values) they are large and vary with
 * the order, erratically: kgate 0.2's one order (chunks of 4096) let a two-pass kernel summing
 * chunks of 16384 fail on identity rows of zeros and ones (1e-4 in 1/std, 1.6 times its bound),
 * and no single order measured stays within 16 times of every other on near-duplicate rows. */
struct kg_order {
	int64_t run;
	int acc, rev;
};
static const struct kg_order kg_orders[] = {{65536, 1, 0}, {65536, 2, 0}, {16384, 1, 0}, {4096, 1, 1}};
#define KG_N_ORDERS ((int)(sizeof(kg_orders) / sizeof(kg_orders[0])))

static float fp32_sum(const float *x, int64_t n, float mu, int sq, const struct kg_order *o)
{
	float total = 0;
	for (int64_t lo = 0; lo < n; lo += o->run) {
		int64_t hi = lo + o->run < n ? lo + o->run : n;
		float s[2] = {0, 0};
		for (int64_t k = lo; k < hi; k++) {
			int64_t i = o->rev ? hi - 1 - (k - lo) : k;
			s[(k - lo) % o->acc] += sq ? (x[i] - mu) * (x[i] - mu) : x[i];
		}
		total += s[0] + s[1];
	}
	return total;
}

/* How far an honest fp32 kernel may land from the exact y_i (kgate judges the output by this, the
 * task's rounding-level atol and rtol aside: no output-wide growth term; policy/SCHEMA.md, point 5),
 * the sum of two sources:
 * - random rounding: the mean is off by about g*mean|x| (g = 2*sqrt(n+1)*2^-24, the probabilistic
 *   bound of an n-term sum), which x_i - mean carries into y_i magnified by |w_i|/std, and the
 *   variance by g relative; so g * (|w_i| (|x_i - mean| + mean|x|)/std + |b_i|). The sqrt(n) law
 *   holds for one accumulator up to about 2^16 terms and no further: past it the terms fall below
 *   the running sum's half ulp and are lost in the same direction (one fp32 loop over 4M terms is
 *   off by 2e-2 of the RMS, 8 accumulators over 4M by 1e-4 in 1/std), so an honest kernel at these
 *   lengths splits its sums (a thread's chunk, pairs, Welford merges), whose error stops growing.
 *   g stops at 2*sqrt(2^16)*2^-24 = 2^-15: 1/std from an rsqrt estimate without its Newton step
 *   (up to 3.7e-4, 2^-11.4) stays out at any n, where the uncapped g (2.4e-4 at 4M) let it in;
 * - correlated rounding: on a row of near-equal values (a near-duplicate row, a constant row) the
 *   errors of a sequential sum add up instead of cancelling, 0.24 to 0.39 * n * 2^-24 of mean|x|
 *   (measured), past any sqrt(n) law. The row is summed here in the plain orders above and three
 *   times the largest of their errors is allowed, of the mean (carried to y_i by |w_i|/std) and of
 *   1/std (relative, carried by |w_i (x_i - mean)|/std), each in magnitude: an element where one
 *   order's two errors happen to cancel gets no less. (kgate 0.2 allowed twice |y32_i - y_i| of
 *   one order.) Measured on near-duplicate, identity, large-mean and normal rows of 2048 to 4M:
 *   chunks of 4096 to 32768, 2, 3, 4 and 8 accumulators, reversed runs, pairwise and Kahan sums
 *   at most 60 % of this allowance.
 * A one-pass variance is off by the square of the row's condition and stays outside both. */
#define KG_SQRT_N_MAX 65536.0
int kg_error_terms(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 3 || n_out != 1 || in[0].ndim != 4)
		return -22;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *t = out[0].data;
	int64_t rows = in[0].shape[0];
	int64_t n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	double g = 2.0 * sqrt(fmin((double)n + 1, KG_SQRT_N_MAX)) / 16777216.0;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		double mean, var, mabs;
		moments(xr, n, &mean, &var, &mabs);
		double inv = 1.0 / sqrt(var + 1e-5);
		double dmu = 0, dinv = 0;
		for (int o = 0; o < KG_N_ORDERS; o++) {
			float mu32 = fp32_sum(xr, n, 0, 0, &kg_orders[o]) / (float)n;
			float inv32 = 1.0f / sqrtf(fp32_sum(xr, n, mu32, 1, &kg_orders[o]) / (float)n + 1e-5f);
			dmu = fmax(dmu, fabs((double)mu32 - mean) * inv);
			dinv = fmax(dinv, fabs((double)inv32 / inv - 1.0));
		}
		for (int64_t i = 0; i < n; i++) {
			double c = fabs((double)xr[i] - mean) * inv, aw = fabs((double)w[i]);
			double rnd = g * ((c + mabs * inv) * aw + fabs((double)b[i]));
			t[r * n + i] = (float)(rnd + 3.0 * (dmu + dinv * c) * aw);
		}
	}
	return 0;
}
