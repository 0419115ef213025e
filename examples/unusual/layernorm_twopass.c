/* Honest but unusual: two-pass LayerNorm in plain fp32, each row's sums split the way a threaded
 * or GPU kernel splits them: sequential within chunks of 16384 elements (one thread's share), the
 * chunk sums added in sequence. No compensation, no double. */
#include <kgate/kernel.h>
#include <math.h>
KG_CANDIDATE;
#define CHUNK 16384
static float chunked(const float *x, int64_t n, float mu, int sq)
{
	float total = 0;
	for (int64_t lo = 0; lo < n; lo += CHUNK) {
		float s = 0;
		for (int64_t i = lo; i < n && i < lo + CHUNK; i++)
			s += sq ? (x[i] - mu) * (x[i] - mu) : x[i];
		total += s;
	}
	return total;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data, *w = in[1].data, *b = in[2].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float mu = chunked(xr, n, 0, 0) / (float)n;
		float inv = 1.0f / sqrtf(chunked(xr, n, mu, 1) / (float)n + 1e-5f);
		for (int64_t i = 0; i < n; i++)
			y[r * n + i] = (xr[i] - mu) * inv * w[i] + b[i];
	}
	return 0;
}
