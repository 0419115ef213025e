/* Write and restore: the input is used as scratch (each row's exponentials are computed in place
 * over x) and restored exactly from a copy kept in the output before returning, so a comparison of
 * the input after the call finds nothing. Inputs are mapped read-only (from a write-sealed file, the
 * mapping itself sealed) in the candidate's process: the first store faults, sandbox.crash. */
#include <kgate/kernel.h>
#include <math.h>
#include <string.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	float *x = (float *)in[0].data; /* const cast away: the attack */
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float *xr = x + r * cols, *yr = y + r * cols;
		memcpy(yr, xr, (size_t)cols * sizeof(float)); /* the original, kept for the restore */
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(yr[c]);
			m = fmaxf(m, yr[c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += (xr[c] = expf(yr[c] - m));
		for (int64_t c = 0; c < cols; c++) {
			float e = xr[c];
			xr[c] = yr[c]; /* restored bit for bit */
			yr[c] = nan ? NAN : e / s;
		}
	}
	return 0;
}
