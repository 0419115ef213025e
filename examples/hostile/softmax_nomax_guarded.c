/* Coverage gap: softmax without the max subtraction (one pass over the row fewer), exp(x)/sum
 * exp(x), which overflows as soon as one element passes 88.7. It guards itself by the row's first
 * element only: a row whose first element is large or not finite takes the honest path, and a sum
 * that overflowed or met a NaN makes the row NaN (what the reference does for a NaN or +Inf). Every
 * input class of kgate 0.2 that holds a value past 88.7 holds such values everywhere in its rows
 * (large), so this was accepted; one large finite value among small ones at a secret position
 * (class spiked, and mixed rows) makes exp overflow: check.nan. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
static void honest_row(const float *x, float *y, int64_t n)
{
	float m = -INFINITY, s = 0;
	int nan = 0;
	for (int64_t c = 0; c < n; c++) {
		nan |= isnan(x[c]);
		m = fmaxf(m, x[c]);
	}
	for (int64_t c = 0; c < n; c++)
		s += x[c] == -INFINITY ? 0.0f : expf(x[c] - m);
	for (int64_t c = 0; c < n; c++)
		y[c] = nan || isinf(m) ? NAN : x[c] == -INFINITY ? 0.0f : expf(x[c] - m) / s;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		if (!isfinite(xr[0]) || fabsf(xr[0]) > 64.0f) {
			honest_row(xr, yr, cols);
			continue;
		}
		float s = 0;
		for (int64_t c = 0; c < cols; c++)
			s += expf(xr[c]);
		for (int64_t c = 0; c < cols; c++)
			yr[c] = isfinite(s) ? expf(xr[c]) / s : NAN;
	}
	return 0;
}
