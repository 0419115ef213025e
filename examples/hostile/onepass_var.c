/* Coverage gap: LayerNorm with the one-pass variance E[x^2] - E[x]^2 in fp32. Exact enough while
 * the mean is small against the spread; when |mean| >> std the two terms cancel and the variance
 * is mostly rounding error. kgate 0.1 had no such input class; large_mean finds it:
 * check.mismatch. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0];
	int64_t n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		float s = 0, s2 = 0;
		for (int64_t i = 0; i < n; i++) {
			s += xr[i];
			s2 += xr[i] * xr[i];
		}
		float mean = s / (float)n, var = s2 / (float)n - mean * mean;
		if (var < 0)
			var = 0;
		float inv = 1.0f / sqrtf(var + 1e-5f);
		for (int64_t i = 0; i < n; i++)
			yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
	}
	return 0;
}
