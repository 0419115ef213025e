/* Trusted CPU reference for LayerNorm over the trailing dimensions: two passes in double
 * (mean, then centred variance), biased variance, eps 1e-5, as torch.nn.LayerNorm. */
#include <kgate/kernel.h>
#include <math.h>

KG_CANDIDATE;

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
		double mean = 0, var = 0;
		for (int64_t i = 0; i < n; i++)
			mean += xr[i];
		mean /= (double)n;
		for (int64_t i = 0; i < n; i++)
			var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
		var /= (double)n;
		double inv = 1.0 / sqrt(var + 1e-5);
		for (int64_t i = 0; i < n; i++)
			yr[i] = (float)(((double)xr[i] - mean) * inv * w[i] + b[i]);
	}
	return 0;
}
