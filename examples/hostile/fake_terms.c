/* Attack on `terms: reference`: the candidate exports its own kg_error_terms claiming every
 * element is hopelessly ill-conditioned (T_i = 1e30), hoping kgate widens the bound from it, and
 * computes LayerNorm with the one-pass variance. The error scales come from the trusted
 * reference's process only; kgate never calls the candidate's: check.mismatch. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
int kg_error_terms(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)n_out, (void)stream;
	float *t = out[0].data;
	for (int64_t i = 0; i < kg_numel(&out[0]); i++)
		t[i] = 1e30f;
	return 0;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float s = 0, s2 = 0;
		for (int64_t i = 0; i < n; i++) {
			s += xr[i];
			s2 += xr[i] * xr[i];
		}
		float mean = s / (float)n, var = s2 / (float)n - mean * mean;
		float inv = 1.0f / sqrtf((var < 0 ? 0 : var) + 1e-5f);
		for (int64_t i = 0; i < n; i++)
			y[r * n + i] = (xr[i] - mean) * inv * w[i] + b[i];
	}
	return 0;
}
