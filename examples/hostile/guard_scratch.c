/* Write and restore: the bytes right after the output are used as scratch (a row's exponentials
 * are staged there) and put back exactly before returning, so a canary compared after the call
 * finds nothing. The page after every tensor is inaccessible and sealed in the candidate's
 * process: the first store faults, sandbox.crash (front_band.c uses the band before a tensor). */
#include <kgate/kernel.h>
#include <math.h>
#include <string.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	float *scratch = y + rows * cols; /* past the end */
	int64_t span = cols < 256 ? cols : 256;
	float saved[256];
	memcpy(saved, scratch, (size_t)span * sizeof(float));
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int64_t c0 = 0; c0 < cols; c0 += span) {
			int64_t n = cols - c0 < span ? cols - c0 : span;
			for (int64_t c = 0; c < n; c++)
				s += (scratch[c] = expf(xr[c0 + c] - m));
		}
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : expf(xr[c] - m) / s;
	}
	memcpy(scratch, saved, (size_t)span * sizeof(float));
	return 0;
}
