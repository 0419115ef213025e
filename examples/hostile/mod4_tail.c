/* Coverage gap: a softmax in groups of four whose tail handling is wrong only when C % 4 == 2
 * (the last two elements are left out of the sum). The task's fixed variants (C = 1000, 1, 4097,
 * 127) never have that residue; the secret random shapes, drawn so that every residue mod 4
 * appears in a run, do: check.shape_variant. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	int64_t body = cols / 4 * 4, tail = cols % 4 == 2 ? 0 : cols - body; /* the bug */
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int64_t c = 0; c < body; c += 4)
			s += expf(xr[c] - m) + expf(xr[c + 1] - m) + expf(xr[c + 2] - m) + expf(xr[c + 3] - m);
		for (int64_t c = body; c < body + tail; c++)
			s += expf(xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : expf(xr[c] - m) / s;
	}
	return 0;
}
