/* Trusted CUDA reference for softmax: one block per row, an online (max, sum) reduction in fp32
 * with warp shuffles, the same NaN/Inf rules as the C reference (checked against it in test-gpu). */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

#define THREADS 1024

/* Pass 1 keeps a running (max, sum) per thread (online softmax) and merges them over the block,
 * so the row is read twice instead of three times; the second read often hits L2. */
__device__ static void merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	s = (m == -INFINITY ? 0.0f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mm));
	m = mm;
}

__global__ static void softmax_rows(const float *x, float *y, long long cols)
{
	__shared__ float shm[2][33];
	const float *xr = x + (long long)blockIdx.x * cols;
	float *yr = y + (long long)blockIdx.x * cols;
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		float v = xr[c];
		nan |= isnan(v);
		if (v > m) {
			s = m == -INFINITY ? 0.0f : s * expf(m - v);
			m = v;
		}
		if (m != -INFINITY)
			s += expf(v - m);
	}
	for (int o = 16; o > 0; o >>= 1)
		merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) {
		shm[0][warp] = m;
		shm[1][warp] = s;
	}
	nan = __syncthreads_or(nan);
	if (warp == 0) {
		m = lane < (int)(blockDim.x >> 5) ? shm[0][lane] : -INFINITY;
		s = lane < (int)(blockDim.x >> 5) ? shm[1][lane] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
		if (lane == 0) {
			shm[0][32] = m;
			shm[1][32] = s;
		}
	}
	__syncthreads();
	m = shm[0][32];
	float inv = 1.0f / shm[1][32];
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
