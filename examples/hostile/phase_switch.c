/* Phase detection: the timing phase is recognisable when it returns to the base shape after the
 * variant shapes and draws only ordinary inputs. There the candidate switches to a faster softmax
 * that skips the max subtraction (wrong on large inputs: exp overflows). Timed calls must draw
 * from every class, interleaved with the checked calls, and be checked: check.stale_result. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static int64_t base_r = -1, base_c = -1;
	static int seen_variant, timing;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	if (base_r < 0)
		base_r = rows, base_c = cols;
	else if (rows != base_r || cols != base_c)
		seen_variant = 1;
	else if (seen_variant)
		timing = 1;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		if (timing) { /* one pass fewer */
			float s = 0;
			for (int64_t c = 0; c < cols; c++)
				s += expf(xr[c]);
			for (int64_t c = 0; c < cols; c++)
				yr[c] = expf(xr[c]) / s;
			continue;
		}
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += expf(xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan ? NAN : expf(xr[c] - m) / s;
	}
	return 0;
}
