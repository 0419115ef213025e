/* Write and restore within one device call: the input is saved to a buffer of the candidate's own,
 * used as scratch (each element replaced by its exponential) for the call's work, which reads it
 * there, and restored from the saved copy before the call ends, so the input is bit-identical when
 * the call returns. The scratch phase lasts 5 ms (a spin in the kernel that reads it): the device's
 * time slices between contexts are a few milliseconds, and a capture by another context lands in
 * it whatever the scheduler does. kgate main 9500fee compared the inputs only after the call: accepted.
 * kgate-device now captures the inputs at a secret moment after the call's release on the device's
 * clock (a stream of its own, behind a copy of that length) and compares the capture at END:
 * check.input_modified, mid-call. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

/* every element of x replaced by exp(x - its row's max), the rows' sums into sum, the outputs from
 * the scratch; 5 ms spent between (the work that uses the scratch) */
__global__ static void exp_in_place(float *x, float *sum, long long cols, int *nan_row)
{
	__shared__ float red[1024];
	float *xr = x + blockIdx.x * cols;
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
	__syncthreads();
	float s = 0.0f;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		float e = expf(xr[c] - m);
		xr[c] = e; /* the input is scratch now */
		s += e;
	}
	red[threadIdx.x] = s;
	__syncthreads();
	for (unsigned o = blockDim.x / 2; o > 0; o >>= 1) {
		if (threadIdx.x < o)
			red[threadIdx.x] += red[threadIdx.x + o];
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		sum[blockIdx.x] = red[0];
		nan_row[blockIdx.x] = nan;
	}
}

__global__ static void spin(unsigned long long ns)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
}

__global__ static void normalise(const float *scratch, const float *sum, const int *nan_row, float *y, long long cols)
{
	const float *er = scratch + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	float inv = 1.0f / sum[blockIdx.x];
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = nan_row[blockIdx.x] ? NAN : er[c] * inv;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], cols = in[0].shape[1];
	size_t bytes = (size_t)rows * (size_t)cols * sizeof(float);
	static float *saved, *sum;
	static int *nan_row;
	static size_t cap;
	if (!rows || !cols)
		return 0;
	if (bytes > cap || (size_t)rows * sizeof(float) > cap) {
		cudaFree(saved);
		cudaFree(sum);
		cudaFree(nan_row);
		cap = bytes > (size_t)rows * 4 ? bytes : (size_t)rows * 4;
		if (cudaMalloc(&saved, cap) || cudaMalloc(&sum, cap) || cudaMalloc(&nan_row, cap))
			return -12;
	}
	float *x = (float *)in[0].data;
	cudaMemcpyAsync(saved, x, bytes, cudaMemcpyDeviceToDevice, s);
	exp_in_place<<<(unsigned)rows, 1024, 0, s>>>(x, sum, cols, nan_row);
	spin<<<1, 1, 0, s>>>(5000000ull);
	normalise<<<(unsigned)rows, 256, 0, s>>>(x, sum, nan_row, (float *)out[0].data, cols);
	cudaMemcpyAsync(x, saved, bytes, cudaMemcpyDeviceToDevice, s); /* restored, bit for bit */
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
