/* Honest, with device memory of its own: the rows' maxima and sums are kept in a scratch buffer it
 * allocates (and grows) with cudaMalloc, 256 MiB at the least, far below the policy's gpu.memory_mb
 * (8 GiB by default): kgate's count of the device memory the candidate holds (kgate-device's
 * reading of the device's free memory, less what the reference took) must leave it alone.
 * Must pass. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

/* one block a row: its maximum and its sum of exponentials into stats[2 * row] */
__global__ static void row_stats(const float *x, float *stats, long long cols)
{
	__shared__ float red[1024];
	__shared__ int snan;
	const float *xr = x + blockIdx.x * cols;
	float m = -INFINITY;
	int nan = 0;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		nan |= isnan(xr[c]);
		m = fmaxf(m, xr[c]);
	}
	red[threadIdx.x] = m;
	nan = __syncthreads_or(nan);
	for (unsigned o = blockDim.x / 2; o > 0; o >>= 1) {
		if (threadIdx.x < o)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + o]);
		__syncthreads();
	}
	m = red[0];
	if (threadIdx.x == 0)
		snan = nan;
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
	if (threadIdx.x == 0) {
		stats[2 * blockIdx.x] = snan ? NAN : m;
		stats[2 * blockIdx.x + 1] = red[0];
	}
}

__global__ static void normalise(const float *x, const float *stats, float *y, long long cols)
{
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	float m = stats[2 * blockIdx.x], inv = 1.0f / stats[2 * blockIdx.x + 1];
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = isnan(m) ? NAN : expf(xr[c] - m) * inv;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], cols = in[0].shape[1];
	static float *stats;
	static size_t cap;
	size_t need = (size_t)rows * 2 * sizeof(float);
	if (need < (256u << 20))
		need = 256u << 20;
	if (need > cap) {
		cudaFree(stats);
		cap = 0;
		if (cudaMalloc(&stats, need))
			return -12;
		cap = need;
	}
	if (!rows || !cols)
		return 0;
	row_stats<<<(unsigned)rows, 1024, 0, s>>>((const float *)in[0].data, stats, cols);
	normalise<<<(unsigned)rows, 256, 0, s>>>((const float *)in[0].data, stats, (float *)out[0].data, cols);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
