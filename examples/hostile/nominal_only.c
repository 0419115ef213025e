/* Shortcut: a kernel specialised to the benchmark shape (here the `ci` set, 64 x 1000) that is
 * wrong anywhere else — it assumes 1000 columns. check.shape_variant. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
#define COLS 1000
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	int64_t n = rows * cols;
	for (int64_t r = 0; r * COLS < n; r++) {
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < COLS && r * COLS + c < n; c++) {
			nan |= isnan(x[r * COLS + c]);
			m = fmaxf(m, x[r * COLS + c]);
		}
		for (int64_t c = 0; c < COLS && r * COLS + c < n; c++)
			s += expf(x[r * COLS + c] - m);
		for (int64_t c = 0; c < COLS && r * COLS + c < n; c++)
			y[r * COLS + c] = nan ? NAN : expf(x[r * COLS + c] - m) / s;
	}
	return 0;
}
