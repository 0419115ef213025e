/* Shortcut: keep the intermediates and the result in bf16 (emulated here, rounding to nearest
 * even) to move half the bytes. The error, a few 1e-3, is far beyond an fp32 tolerance:
 * check.mismatch; a policy that accepts bf16 precision accepts it. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
KG_CANDIDATE;
static float bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	u &= 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}
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
			s += bf16(expf(x[r * cols + c] - m));
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : bf16(bf16(expf(x[r * cols + c] - m)) / s);
	}
	return 0;
}
