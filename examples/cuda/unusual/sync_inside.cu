/* Honest, and waits for its own stream inside the call: a pass over the input flags whether any
 * element is not finite, the flag is copied back to the host and the stream synchronised, and the
 * call then takes the plain kernel (all finite) or the one that carries NaN rows through. A call
 * that waits for its stream before its work is queued whole: under kgate's gated calls (device/
 * wire.h) the stream waits for kgate-device's release, which comes once the runner has armed the
 * call, before kg_forward runs: nothing waits in a circle. Must pass. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

__global__ static void any_nonfinite(const float *x, long long n, int *flag)
{
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		if (!isfinite(x[i]))
			*flag = 1;
}

/* the all-finite rows: no NaN to carry */
__global__ static void softmax_finite(const float *x, float *y, long long cols)
{
	__shared__ float red[1024];
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	float m = -INFINITY;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		m = fmaxf(m, xr[c]);
	red[threadIdx.x] = m;
	__syncthreads();
	for (unsigned o = blockDim.x / 2; o > 0; o >>= 1) {
		if (threadIdx.x < o)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + o]);
		__syncthreads();
	}
	m = red[0];
	__syncthreads();
	float s = 0.0f;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		s += expf(xr[c] - m);
	red[threadIdx.x] = s;
	__syncthreads();
	for (unsigned o = blockDim.x / 2; o > 0; o >>= 1) {
		if (threadIdx.x < o)
			red[threadIdx.x] += red[threadIdx.x + o];
		__syncthreads();
	}
	float inv = 1.0f / red[0];
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = expf(xr[c] - m) * inv;
}

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

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], cols = in[0].shape[1];
	static int *flag_dev, *flag_host;
	if (!flag_dev && (cudaMalloc(&flag_dev, sizeof(int)) || cudaMallocHost(&flag_host, sizeof(int))))
		return -12;
	if (!rows || !cols)
		return 0;
	const float *x = (const float *)in[0].data;
	float *y = (float *)out[0].data;
	cudaMemsetAsync(flag_dev, 0, sizeof(int), s);
	any_nonfinite<<<256, 256, 0, s>>>(x, rows * cols, flag_dev);
	cudaMemcpyAsync(flag_host, flag_dev, sizeof(int), cudaMemcpyDeviceToHost, s);
	if (cudaStreamSynchronize(s) != cudaSuccess)
		return -5;
	if (*flag_host)
		softmax<<<(unsigned)rows, 1024, 0, s>>>(x, y, cols);
	else
		softmax_finite<<<(unsigned)rows, 1024, 0, s>>>(x, y, cols);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
