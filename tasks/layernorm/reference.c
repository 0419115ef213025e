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

/* The sums of the plainest honest fp32 LayerNorm: sequential fp32 within blocks of
 * KG_SEQ_BLOCK elements (a thread's chunk), the block sums added in sequence in fp32. */
#define KG_SEQ_BLOCK 4096
static float fp32_sum(const float *x, int64_t n, float mu, int sq)
{
	float total = 0;
	for (int64_t lo = 0; lo < n; lo += KG_SEQ_BLOCK) {
		float s = 0;
		for (int64_t i = lo; i < n && i < lo + KG_SEQ_BLOCK; i++)
			s += sq ? (x[i] - mu) * (x[i] - mu) : x[i];
		total += s;
	}
	return total;
}

/* How far an honest fp32 kernel may land from the exact y_i (kgate allows this much more where
 * the output-wide bound fails; policy/SCHEMA.md, point 5), the larger of two sources:
 * - random rounding: the mean is off by about g*mean|x| (g = 2*sqrt(n+1)*2^-24, the probabilistic
 *   bound of an n-term sum), which x_i - mean carries into y_i magnified by |w_i|/std, and the
 *   variance by g relative; so g * (|w_i| (|x_i - mean| + mean|x|)/std + |b_i|);
 * - correlated rounding: on a row of near-equal values (a near-duplicate row, a constant row) the
 *   errors of a sequential sum add up instead of cancelling, 0.24 to 0.39 * n * 2^-24 of mean|x|
 *   (measured), past any sqrt(n) law. The plainest honest kernel is run here on the same row
 *   (fp32_sum) and twice its own error is allowed.
 * A one-pass variance is off by the square of the row's condition and stays outside both. */
int kg_error_terms(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 3 || n_out != 1 || in[0].ndim != 4)
		return -22;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *t = out[0].data;
	int64_t rows = in[0].shape[0];
	int64_t n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	double g = 2.0 * sqrt((double)n + 1) / 16777216.0;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		double mean, var, mabs;
		moments(xr, n, &mean, &var, &mabs);
		double inv = 1.0 / sqrt(var + 1e-5);
		float mu32 = fp32_sum(xr, n, 0, 0) / (float)n;
		float inv32 = 1.0f / sqrtf(fp32_sum(xr, n, mu32, 1) / (float)n + 1e-5f);
		for (int64_t i = 0; i < n; i++) {
			double y = ((double)xr[i] - mean) * inv * w[i] + b[i];
			float y32 = (xr[i] - mu32) * inv32 * w[i] + b[i];
			double rnd = g * ((fabs((double)xr[i] - mean) + mabs) * inv * fabs((double)w[i]) + fabs((double)b[i]));
			t[r * n + i] = (float)(rnd + 2.0 * fabs((double)y32 - y));
		}
	}
	return 0;
}
