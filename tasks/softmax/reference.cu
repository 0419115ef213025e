/* Trusted CUDA reference for softmax: one block per row, max then sum reductions in fp32 with
 * warp shuffles, the same NaN/Inf rules as the C reference (checked against it in test-gpu). */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

#define THREADS 1024

__device__ static float block_reduce(float v, bool is_max, float *shm)
{
	for (int o = 16; o > 0; o >>= 1) {
		float u = __shfl_xor_sync(0xffffffffu, v, o);
		v = is_max ? fmaxf(v, u) : v + u;
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0)
		shm[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x >> 5) ? shm[lane] : (is_max ? -INFINITY : 0.0f);
		for (int o = 16; o > 0; o >>= 1) {
			float u = __shfl_xor_sync(0xffffffffu, v, o);
			v = is_max ? fmaxf(v, u) : v + u;
		}
		if (lane == 0)
			shm[32] = v;
	}
	__syncthreads();
	float r = shm[32];
	__syncthreads();
	return r;
}

__global__ static void softmax_rows(const float *x, float *y, long long cols)
{
	__shared__ float shm[33];
	const float *xr = x + (long long)blockIdx.x * cols;
	float *yr = y + (long long)blockIdx.x * cols;
	float m = -INFINITY;
	int nan = 0;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		nan |= isnan(xr[c]);
		m = fmaxf(m, xr[c]);
	}
	m = block_reduce(m, true, shm);
	nan = __syncthreads_or(nan);
	float s = 0.0f;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		s += expf(xr[c] - m);
	s = block_reduce(s, false, shm);
	float inv = 1.0f / s;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = nan ? NAN : expf(xr[c] - m) * inv;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1 || in[0].ndim != 2)
		return -22;
	long long rows = in[0].shape[0], cols = in[0].shape[1];
	softmax_rows<<<(unsigned)rows, THREADS, 0, (cudaStream_t)stream>>>((const float *)in[0].data, (float *)out[0].data,
									       cols);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
