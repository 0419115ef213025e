/* Too-low precision at long reductions: LayerNorm whose mean and variance are exact enough (two
 * passes, double sums) but whose 1/sqrt(var + eps) is the hardware estimate rsqrtss without the
 * Newton step that makes it fp32 (relative error up to 1.5*2^-12, 3.7e-4, one factor per row),
 * on rows of 65536 and more only, where kgate 0.2's growth term (2^-10 from 65536 terms on) is
 * wider than that error; shorter rows (the variant and random shapes) get 1/sqrtf: accepted at
 * the KernelBench row of 64*256*256. Honest kernels' 1/std is off by far less:
 * check.mismatch. */
#include <kgate/kernel.h>
#include <immintrin.h>
#include <math.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		double s = 0, v = 0;
		for (int64_t i = 0; i < n; i++)
			s += xr[i];
		float mu = (float)(s / (double)n);
		for (int64_t i = 0; i < n; i++)
			v += (double)(xr[i] - mu) * (double)(xr[i] - mu);
		float var = (float)(v / (double)n) + 1e-5f;
		float inv = n >= 65536 ? _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(var))) : 1.0f / sqrtf(var);
		for (int64_t i = 0; i < n; i++)
			y[r * n + i] = (xr[i] - mu) * inv * w[i] + b[i];
	}
	return 0;
}
