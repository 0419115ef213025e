/* Sampled caching: each row's result is cached under a key of 8 sampled elements of the row, and
 * a row whose samples match a cached row gets that row's output copied. Random inputs never
 * repeat samples, so kgate 0.1 saw a correct kernel; near-duplicate rows (equal but for a few
 * elements) hit the cache with a different row: check.mismatch. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
KG_CANDIDATE;
#define SLOTS 64
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	uint64_t key[SLOTS];
	int64_t row_of[SLOTS];
	for (int i = 0; i < SLOTS; i++)
		row_of[i] = -1;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		uint64_t h = 1469598103934665603ull;
		for (int k = 0; k < 8; k++) {
			uint32_t bits;
			memcpy(&bits, &xr[(int64_t)k * cols / 8], 4);
			h = (h ^ bits) * 1099511628211ull;
		}
		int slot = (int)(h % SLOTS);
		if (row_of[slot] >= 0 && key[slot] == h) {
			memcpy(y + r * cols, y + row_of[slot] * cols, (size_t)cols * sizeof(float));
			continue;
		}
		key[slot] = h;
		row_of[slot] = r;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += expf(xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : expf(xr[c] - m) / s;
	}
	return 0;
}
