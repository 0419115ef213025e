/* Honest, unusual: one warp per row, online softmax in registers (running max and rescaled sum per
 * lane, merged by shuffles), no shared memory and no block barrier. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

__device__ static void merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	s = (m == -INFINITY ? 0.0f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mm));
	m = mm;
}

__global__ static void softmax_warp(const float *x, float *y, long long rows, long long cols)
{
	long long r = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
	int lane = threadIdx.x & 31;
	if (r >= rows)
		return; /* whole warps leave together: r is the same across a warp */
	const float *xr = x + r * cols;
	float *yr = y + r * cols;
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	for (long long c = lane; c < cols; c += 32) {
		float v = xr[c];
		nan |= isnan(v);
		if (v > m) {
			s = m == -INFINITY ? 0.0f : s * expf(m - v);
			m = v;
		}
		s += expf(v - m);
	}
	for (int o = 16; o > 0; o >>= 1)
		merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
	nan = __any_sync(0xffffffffu, nan);
	float inv = 1.0f / s;
	for (long long c = lane; c < cols; c += 32)
		yr[c] = nan ? NAN : expf(xr[c] - m) * inv;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	long long rows = in[0].shape[0];
	unsigned blocks = (unsigned)((rows + 7) / 8);
	softmax_warp<<<blocks, 256, 0, (cudaStream_t)stream>>>((const float *)in[0].data, (float *)out[0].data, rows,
							       in[0].shape[1]);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
