/* A guard band used as scratch and restored within one device call: the 4 KiB after the output
 * (kgate's canary band) are saved, hold the rows' maxima and sums while the call works (5 ms of it:
 * the device's time slices between contexts are a few milliseconds, and a capture by another
 * context lands in it whatever the scheduler does), and are written back before the call ends. The
 * band is what kgate wrote when the call returns: kgate main 9500fee looked at it only then,
 * accepted. kgate-device now captures the bands after the outputs at a secret moment after the
 * call's release on the device's clock and compares the capture at END: check.canary, mid-call.
 * (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

#define BAND 4096

/* the rows' maximum and sum into the band (two floats a row, as many rows as fit; the rest of the
 * rows' in a buffer of the candidate's own) */
__global__ static void stats(const float *x, float *band, float *rest, long long rows, long long cols)
{
	__shared__ float red[1024];
	const float *xr = x + blockIdx.x * cols;
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
	if (threadIdx.x == 0) {
		float *at = blockIdx.x < BAND / 8 ? band + 2 * blockIdx.x : rest + 2 * blockIdx.x;
		at[0] = m;
		at[1] = red[0];
	}
	(void)rows;
}

__global__ static void spin(unsigned long long ns)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
}

__global__ static void normalise(const float *x, const float *band, const float *rest, float *y, long long cols)
{
	const float *at = blockIdx.x < BAND / 8 ? band + 2 * blockIdx.x : rest + 2 * blockIdx.x;
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	float m = at[0], inv = 1.0f / at[1];
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = isnan(m) ? NAN : expf(xr[c] - m) * inv;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], cols = in[0].shape[1];
	static float *saved, *rest;
	static long long cap;
	if (!rows || !cols)
		return 0;
	if (!saved && cudaMalloc(&saved, BAND))
		return -12;
	if (rows > cap) {
		cudaFree(rest);
		if (cudaMalloc(&rest, (size_t)rows * 2 * sizeof(float)))
			return -12;
		cap = rows;
	}
	/* the band right after the output, on its 4-byte edge */
	float *band = (float *)out[0].data + rows * cols;
	cudaMemcpyAsync(saved, band, BAND, cudaMemcpyDeviceToDevice, s);
	stats<<<(unsigned)rows, 1024, 0, s>>>((const float *)in[0].data, band, rest, rows, cols);
	spin<<<1, 1, 0, s>>>(5000000ull);
	normalise<<<(unsigned)rows, 256, 0, s>>>((const float *)in[0].data, band, rest, (float *)out[0].data, cols);
	cudaMemcpyAsync(band, saved, BAND, cudaMemcpyDeviceToDevice, s); /* restored, bit for bit */
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
