/* Honest LayerNorm for tests/data/kernelbench/layernorm.py: x [B, F, D1, D2], then the Model's
 * ln.weight and ln.bias [F, D1, D2]; two passes in double per sample, eps 1e-5 as nn.LayerNorm. */
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
	int64_t batch = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t s = 0; s < batch; s++) {
		const float *xs = x + s * n;
		float *ys = y + s * n;
		double mean = 0, var = 0;
		for (int64_t i = 0; i < n; i++)
			mean += xs[i];
		mean /= (double)n;
		for (int64_t i = 0; i < n; i++)
			var += (xs[i] - mean) * (xs[i] - mean);
		double inv = 1.0 / sqrt(var / (double)n + 1e-5);
		for (int64_t i = 0; i < n; i++)
			ys[i] = (float)((xs[i] - mean) * inv * w[i] + b[i]);
	}
	return 0;
}
