/* Honest but unusual: softmax in plain fp32 with the max and the sum in separate passes (the
 * textbook form: one sequential sum of exp(x - max), then each exp times its reciprocal), where
 * examples/softmax/online.c rescales a running sum at every new maximum. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += xr[c] == -INFINITY ? 0.0f : expf(xr[c] - m);
		float inv = 1.0f / s;
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan || isinf(m) ? NAN : xr[c] == -INFINITY ? 0.0f : expf(xr[c] - m) * inv;
	}
	return 0;
}
