/* Bug: a tiled kernel whose bounds check is off by one writes one element past the end of the
 * output, into the device guard band: check.canary. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

__global__ static void softmax_oob(const float *x, float *y, long long rows, long long cols)
{
	long long r = blockIdx.x;
	if (threadIdx.x != 0)
		return;
	float m = -INFINITY, s = 0;
	int nan = 0;
	for (long long c = 0; c < cols; c++) {
		nan |= isnan(x[r * cols + c]);
		m = fmaxf(m, x[r * cols + c]);
	}
	for (long long c = 0; c < cols; c++)
		s += expf(x[r * cols + c] - m);
	for (long long c = 0; c <= cols; c++) /* <= : one past the row; lands in the guard on the last */
		if (c < cols || r == rows - 1)
			y[r * cols + c] = nan ? NAN : expf(x[r * cols + (c < cols ? c : 0)] - m) / s;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out;
	softmax_oob<<<(unsigned)in[0].shape[0], 32, 0, (cudaStream_t)stream>>>(
		(const float *)in[0].data, (float *)out[0].data, in[0].shape[0], in[0].shape[1]);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
