/* Too-low precision at long reductions: softmax (max-subtracted, two passes, honest in every other
 * way) with exp replaced by a degree-3 polynomial for 2^f after the usual range reduction, about
 * 1.7e-4 relative error per element (a fast "good enough" exp, 2^-12.5), where expf is within an
 * ulp. It takes that path only on rows of 16384 and more, where kgate 0.2's growth term (n/4
 * units of 2^-24 on rtol, 2^-10 from 65536 terms on) is wider than its error, so the short variant
 * and random shapes see expf: accepted at 4096x65536. The error varies from element to element, while an honest kernel's
 * reduction error is one factor common to its row: check.mismatch. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
KG_CANDIDATE;
/* e^t for t <= 0: t*log2(e) = k + f, f in [0, 1); 2^f by a cubic, 2^k by the exponent bits */
static float fast_exp(float t, int fast)
{
	if (!fast)
		return expf(t);
	float z = t * 1.44269504f;
	if (z < -126.0f)
		return 0.0f;
	float k = floorf(z), f = z - k;
	float p = 1.0f + f * (0.6963f + f * (0.2240f + f * 0.0797f));
	int32_t e = (int32_t)k + 127;
	uint32_t bits = (uint32_t)e << 23;
	float scale;
	memcpy(&scale, &bits, sizeof(scale));
	return p * scale;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	int fast = cols >= 16384;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += xr[c] == -INFINITY ? 0.0f : fast_exp(xr[c] - m, fast);
		float inv = 1.0f / s;
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan || isinf(m) ? NAN : xr[c] == -INFINITY ? 0.0f : fast_exp(xr[c] - m, fast) * inv;
	}
	return 0;
}
