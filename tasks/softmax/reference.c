/* Trusted CPU reference for softmax: max-subtracted, accumulated in double, rounded once.
 * Defines the non-finite behaviour the task promises: a NaN or +Inf in a row gives a NaN row. */
#include <kgate/kernel.h>
#include <math.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 1 || n_out != 1 || in[0].dtype != KG_F32 || in[0].ndim != 2)
		return -22;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		double m = -INFINITY;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			if (xr[c] > m)
				m = xr[c];
		}
		double s = 0;
		for (int64_t c = 0; c < cols; c++)
			s += exp((double)xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan ? NAN : (float)(exp((double)xr[c] - m) / s);
	}
	return 0;
}
