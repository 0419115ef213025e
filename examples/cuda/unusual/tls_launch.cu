/* Honest, unusual: the host side keeps the device's multiprocessor count in a `static __thread`
 * variable, queried once per host thread, and sizes a grid-stride softmax (a block per row, rows
 * strided over a grid of 4 blocks per SM) from it. nvcc's host compiler reaches the variable
 * through __tls_get_addr, the same import as a C candidate's thread-local buffer
 * (examples/unusual/softmax_tls.c): allowed on both backends. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

static __thread int sm_count = -1;

__global__ static void softmax_rows(const float *x, float *y, long long rows, long long cols)
{
	__shared__ float red[32];
	__shared__ float bm, bs;
	__shared__ int bnan;
	for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -INFINITY;
		int nan = 0;
		for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int o = 16; o > 0; o >>= 1)
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
		nan = __any_sync(0xffffffffu, nan);
		if ((threadIdx.x & 31) == 0)
			red[threadIdx.x >> 5] = nan ? NAN : m;
		__syncthreads();
		if (threadIdx.x == 0) {
			float mm = -INFINITY;
			int n = 0;
			for (unsigned w = 0; w < blockDim.x >> 5; w++) {
				n |= isnan(red[w]);
				mm = fmaxf(mm, red[w]);
			}
			bm = mm;
			bnan = n;
		}
		__syncthreads();
		m = bm;
		/* a row of -inf (or one holding +inf) gives NaN here, as the reference's does */
		float s = 0.0f;
		for (long long c = threadIdx.x; c < cols; c += blockDim.x)
			s += expf(xr[c] - m);
		for (int o = 16; o > 0; o >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if ((threadIdx.x & 31) == 0)
			red[threadIdx.x >> 5] = s;
		__syncthreads();
		if (threadIdx.x == 0) {
			float t = 0.0f;
			for (unsigned w = 0; w < blockDim.x >> 5; w++)
				t += red[w];
			bs = t;
		}
		__syncthreads();
		float inv = 1.0f / bs;
		int rnan = bnan;
		for (long long c = threadIdx.x; c < cols; c += blockDim.x)
			yr[c] = rnan ? NAN : expf(xr[c] - m) * inv;
		__syncthreads(); /* bm, bs and bnan stay until every thread has used them */
	}
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	if (sm_count < 0) {
		int dev = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sm_count < 1)
			return -5;
	}
	long long rows = in[0].shape[0];
	long long grid = 4LL * sm_count;
	if (grid > rows)
		grid = rows > 0 ? rows : 1;
	softmax_rows<<<(unsigned)grid, 256, 0, (cudaStream_t)stream>>>((const float *)in[0].data, (float *)out[0].data,
									rows, in[0].shape[1]);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
