/* Shortcut: launch the real work on a stream of its own, so events on the given stream time
 * nothing. kgate 0.2 named it check.async_escape from the runner's own figure of how long the
 * device stayed busy (a claim). A gated call ends where the given stream's work ends (device/wire.h),
 * and kgate-device's snapshot there holds none of this work: check.unwritten_output, from what the
 * trusted side saw (an H100, 2026-12-06). (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

__global__ static void softmax_slow(const float *x, float *y, long long cols)
{
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	if (threadIdx.x != 0)
		return;
	float m = -INFINITY, s = 0;
	int nan = 0;
	for (long long c = 0; c < cols; c++) {
		nan |= isnan(xr[c]);
		m = fmaxf(m, xr[c]);
	}
	for (long long c = 0; c < cols; c++)
		s += expf(xr[c] - m);
	for (long long c = 0; c < cols; c++)
		yr[c] = nan ? NAN : expf(xr[c] - m) / s;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	static cudaStream_t other;
	(void)n_in, (void)n_out, (void)stream;
	if (!other && cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess)
		return -5;
	softmax_slow<<<(unsigned)in[0].shape[0], 32, 0, other>>>((const float *)in[0].data, (float *)out[0].data,
								 in[0].shape[1]);
	return 0;
}
