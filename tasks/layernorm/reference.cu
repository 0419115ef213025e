/* Trusted CUDA reference for LayerNorm: two passes over each row in double (mean, then centred
 * variance) spread over many blocks with double atomics, then the affine normalisation. Slower
 * than a fused kernel on purpose: it is the yardstick, not a contender. */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

#define THREADS 512
#define CHUNK (THREADS * 16)

__device__ static double block_sum(double v, double *shm)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	if ((threadIdx.x & 31) == 0)
		shm[threadIdx.x >> 5] = v;
	__syncthreads();
	double t = 0;
	if (threadIdx.x == 0)
		for (int w = 0; w < (int)(blockDim.x >> 5); w++)
			t += shm[w];
	__syncthreads();
	return t;
}

/* pass 0: sum of x; pass 1: sum of (x - mean)^2 */
__global__ static void row_moment(const float *x, long long n, const double *mean, double *acc, int pass)
{
	__shared__ double shm[32];
	long long row = blockIdx.y;
	const float *xr = x + row * n;
	long long lo = (long long)blockIdx.x * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
	double mu = pass ? mean[row] : 0.0, s = 0;
	for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
		double d = (double)xr[i] - mu;
		s += pass ? d * d : d;
	}
	s = block_sum(s, shm);
	if (threadIdx.x == 0)
		atomicAdd(&acc[row], s);
}

__global__ static void finish_mean(double *sum, long long n, long long rows)
{
	long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (r < rows)
		sum[r] /= (double)n;
}

__global__ static void normalise(const float *x, const float *w, const float *b, float *y, long long n,
				 const double *mean, const double *m2)
{
	long long row = blockIdx.y;
	double mu = mean[row], inv = rsqrt(m2[row] / (double)n + 1e-5);
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
		y[row * n + i] = (float)(((double)x[row * n + i] - mu) * inv * w[i] + b[i]);
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	static double *scratch;
	static long long scratch_rows;
	if (n_in != 3 || n_out != 1 || in[0].ndim != 4)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	if (rows > scratch_rows) {
		cudaFree(scratch);
		if (cudaMalloc(&scratch, 2 * rows * sizeof(double)) != cudaSuccess)
			return -12;
		scratch_rows = rows;
	}
	double *mean = scratch, *m2 = scratch + rows;
	cudaMemsetAsync(scratch, 0, 2 * rows * sizeof(double), s);
	dim3 grid((unsigned)((n + CHUNK - 1) / CHUNK), (unsigned)rows);
	const float *x = (const float *)in[0].data;
	row_moment<<<grid, THREADS, 0, s>>>(x, n, mean, mean, 0);
	finish_mean<<<(unsigned)((rows + 255) / 256), 256, 0, s>>>(mean, n, rows);
	row_moment<<<grid, THREADS, 0, s>>>(x, n, mean, m2, 1);
	dim3 g2((unsigned)((n + 1023) / 1024 < 4096 ? (n + 1023) / 1024 : 4096), (unsigned)rows);
	normalise<<<g2, 1024, 0, s>>>(x, (const float *)in[1].data, (const float *)in[2].data, (float *)out[0].data, n,
				      mean, m2);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
