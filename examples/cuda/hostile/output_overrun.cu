/* Bug: a float4-vectorised store loop rounds the element count up to a whole vector, writing up
 * to three elements past the output's end (one, where C*R % 4 == 3) into the guard band after it:
 * check.canary. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

__device__ static void merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	s = (m == -INFINITY ? 0.0f : s * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm));
	m = mm;
}

__global__ static void softmax(const float *x, float *y, long long cols)
{
	__shared__ float sm[32], ss[32];
	__shared__ int snan;
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		float v = xr[c];
		nan |= isnan(v);
		if (v > m) {
			s = (m == -INFINITY ? 0.0f : s * __expf(m - v));
			m = v;
		}
		s += __expf(v - m);
	}
	for (int o = 16; o > 0; o >>= 1)
		merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
	if ((threadIdx.x & 31) == 0) {
		sm[threadIdx.x >> 5] = m;
		ss[threadIdx.x >> 5] = s;
	}
	nan = __syncthreads_or(nan);
	if (threadIdx.x < 32) {
		int nw = blockDim.x >> 5;
		m = threadIdx.x < nw ? sm[threadIdx.x] : -INFINITY;
		s = threadIdx.x < nw ? ss[threadIdx.x] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
		if (threadIdx.x == 0) {
			sm[0] = m;
			ss[0] = s;
			snan = nan;
		}
	}
	__syncthreads();
	m = sm[0];
	float inv = 1.0f / ss[0];
	nan = snan;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = nan ? NAN : __expf(xr[c] - m) * inv;
}

__global__ static void touch_tail(float *y, long long n)
{
	/* the last vector, rounded up: the stores past n land in the band */
	long long v = (n + 3) / 4 - 1;
	for (int k = 0; k < 4; k++)
		if (4 * v + k >= n)
			y[4 * v + k] = 0.0f;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], cols = in[0].shape[1], row0 = 0, n = rows * cols;
	softmax<<<(unsigned)rows, 1024, 0, s>>>((const float *)in[0].data + row0 * cols, (float *)out[0].data + row0 * cols, cols);
	/* a whole vector past the end when n is a multiple of 4 */
	touch_tail<<<1, 1, 0, s>>>((float *)out[0].data, n % 4 ? n : n + 1);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
