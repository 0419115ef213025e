/* Tuner template (CPU softmax): `kgate search softmax --agent tuner --template examples/tuner/softmax.c`.
 * Three passes per row: the maximum over ACC independent accumulators, exp(x - max) summed in
 * chunks of BLOCK columns (one partial sum per chunk: shorter dependency chains, less rounding),
 * then the scale. The tuner puts `#define` lines above this text; the defaults below make the
 * template a candidate on its own. */
/* kgate:tune ACC = {1, 2, 4, 8} */
/* kgate:tune BLOCK = {16, 64, 256, 1024} */
#include <kgate/kernel.h>
#include <math.h>

KG_CANDIDATE;

#ifndef ACC
#define ACC 4
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

static float row_max(const float *x, int64_t n, int *nan)
{
	float m[ACC];
	int bad = 0;
	for (int k = 0; k < ACC; k++)
		m[k] = -INFINITY;
	int64_t c = 0;
	for (; c + ACC <= n; c += ACC)
		for (int k = 0; k < ACC; k++) {
			float v = x[c + k];
			bad |= isnan(v);
			m[k] = v > m[k] ? v : m[k];
		}
	for (; c < n; c++) {
		bad |= isnan(x[c]);
		m[0] = x[c] > m[0] ? x[c] : m[0];
	}
	for (int k = 1; k < ACC; k++)
		m[0] = m[k] > m[0] ? m[k] : m[0];
	*nan = bad;
	return m[0];
}

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
		int nan;
		float m = row_max(xr, cols, &nan);
		float s = 0.0f;
		for (int64_t c0 = 0; c0 < cols; c0 += BLOCK) {
			int64_t c1 = c0 + BLOCK < cols ? c0 + BLOCK : cols;
			float part = 0.0f;
			for (int64_t c = c0; c < c1; c++) {
				float e = expf(xr[c] - m);
				yr[c] = e;
				part += e;
			}
			s += part;
		}
		float inv = 1.0f / s;
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan ? NAN : yr[c] * inv;
	}
	return 0;
}
