/* An over-read by one element: a vectorised-looking loop reads x[n] past the input's end (its
 * value never reaches the output, so comparing outputs cannot see it). The page after every
 * tensor is inaccessible and sealed in the candidate's process: the read faults, sandbox.crash. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	volatile float sink = 0;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		sink = xr[cols]; /* one past the row: the next row, or past the tensor on the last */
		for (int64_t c = 0; c < cols; c++)
			s += expf(xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : expf(xr[c] - m) / s;
	}
	(void)sink;
	return 0;
}
