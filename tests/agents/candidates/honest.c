/* Honest softmax candidate, a copy of examples/softmax/online.c for the search tests: one pass
 * for max and sum together (online softmax, Milakov and Gimelshein 2018), then one pass to
 * normalise. fp32 throughout. */
#include <kgate/kernel.h>
#include <math.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 1 || n_out != 1)
		return -22;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -INFINITY, s = 0.0f;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			float v = xr[c];
			nan |= isnan(v);
			if (v == -INFINITY)
				continue; /* adds nothing; before any finite value, expf(-inf - -inf) is NaN */
			if (v > m) {
				s = s * expf(m - v);
				m = v;
			}
			s += expf(v - m);
		}
		float inv = 1.0f / s;
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan ? NAN : expf(xr[c] - m) * inv;
	}
	return 0;
}
