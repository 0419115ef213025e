/* Honest but unusual: two-pass LayerNorm whose fp32 sums (the mean, then the centred squares) are
 * Kahan-compensated, one accumulator over the whole row: the error of a recursive sum without its
 * growth, in fp32 alone. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
static float kahan(const float *x, int64_t n, float mu, int sq)
{
	float s = 0, c = 0;
	for (int64_t i = 0; i < n; i++) {
		float v = sq ? (x[i] - mu) * (x[i] - mu) : x[i];
		float y = v - c, t = s + y;
		c = (t - s) - y;
		s = t;
	}
	return s;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float mu = kahan(xr, n, 0, 0) / (float)n;
		float inv = 1.0f / sqrtf(kahan(xr, n, mu, 1) / (float)n + 1e-5f);
		for (int64_t i = 0; i < n; i++)
			y[r * n + i] = (xr[i] - mu) * inv * w[i] + b[i];
	}
	return 0;
}
