/* Honest but unusual: three passes, accumulating the denominator in double and dividing once per
 * element (slower, more precise than needed). */
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
		double m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(x[r * cols + c]);
			m = fmax(m, x[r * cols + c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += exp(x[r * cols + c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : (float)(exp(x[r * cols + c] - m) / s);
	}
	return 0;
}
