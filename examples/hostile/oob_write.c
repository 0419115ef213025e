/* Bug or shortcut: writes one element past the end of the output (an off-by-one in a tiled
 * kernel). The page after every tensor is inaccessible (and sealed) in the candidate's process:
 * the store faults, sandbox.crash from the wait status (kgate names no address: any word of one
 * would come from the candidate's process). A device arena's guard band is check.canary. */
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
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(x[r * cols + c]);
			m = fmaxf(m, x[r * cols + c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += expf(x[r * cols + c] - m);
		for (int64_t c = 0; c <= cols; c++) /* <=: one too many on the last row */
			if (r == rows - 1 || c < cols)
				y[r * cols + c] = nan ? NAN : expf(x[r * cols + (c < cols ? c : 0)] - m) / s;
	}
	return 0;
}
