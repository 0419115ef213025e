/* Honest LayerNorm candidate: Welford's single-pass mean and variance in fp32 (numerically
 * stable without a second pass), then the affine normalisation. */
#include <kgate/kernel.h>
#include <math.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 3 || n_out != 1)
		return -22;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0];
	int64_t n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double mean = 0, m2 = 0;
		for (int64_t i = 0; i < n; i++) {
			double d = xr[i] - mean;
			mean += d / (double)(i + 1);
			m2 += d * (xr[i] - mean);
		}
		float inv = 1.0f / sqrtf((float)(m2 / (double)n) + 1e-5f);
		float mu = (float)mean;
		for (int64_t i = 0; i < n; i++)
			yr[i] = (xr[i] - mu) * inv * w[i] + b[i];
	}
	return 0;
}
