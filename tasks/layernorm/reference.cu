/* Trusted CUDA reference for LayerNorm: two passes over each row in double (mean, then centred
 * variance) spread over many blocks with double atomics, then the affine normalisation. Slower
 * than a fused kernel on purpose: it is the yardstick, not a contender. kg_error_terms gives each
 * output element's allowance (the manifest's `terms: reference`; reference.c says how). */
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

/* pass 0: sum of x; pass 1: sum of (x - mean)^2; pass 2: sum of |x| */
__global__ static void row_moment(const float *x, long long n, const double *mean, double *acc, int pass)
{
	__shared__ double shm[32];
	long long row = blockIdx.y;
	const float *xr = x + row * n;
	long long lo = (long long)blockIdx.x * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
	double mu = pass == 1 ? mean[row] : 0.0, s = 0;
	for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
		double d = (double)xr[i] - mu;
		s += pass == 1 ? d * d : pass == 2 ? fabs(d) : d;
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

/* The plain fp32 orders of reference.c (kg_orders, fp32_sum): runs of `run` elements, each summed
 * in sequence by one thread with `acc` interleaved accumulators, backwards if rev; then one thread
 * per row adds the runs' sums in sequence. */
struct order {
	long long run;
	int acc, rev;
};
static const order orders[] = {{65536, 1, 0}, {65536, 2, 0}, {16384, 1, 0}, {4096, 1, 1}};
#define N_ORDERS ((int)(sizeof(orders) / sizeof(orders[0])))
#define MIN_RUN 4096

__global__ static void twin_partial(const float *x, long long n, const float *mu32, float *part, long long nblk,
				    int sq, order o)
{
	long long row = blockIdx.y, k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= nblk)
		return;
	const float *xr = x + row * n;
	float mu = sq ? mu32[row] : 0.0f, s[2] = {0.0f, 0.0f};
	long long lo = k * o.run, hi = lo + o.run < n ? lo + o.run : n;
	for (long long j = lo; j < hi; j++) {
		long long i = o.rev ? hi - 1 - (j - lo) : j;
		s[(j - lo) % o.acc] += sq ? (xr[i] - mu) * (xr[i] - mu) : xr[i];
	}
	part[row * nblk + k] = s[0] + s[1];
}

__global__ static void twin_finish(const float *part, long long nblk, long long n, long long rows, float *mu32,
				   float *inv32, int sq)
{
	long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (r >= rows)
		return;
	float t = 0;
	for (long long k = 0; k < nblk; k++)
		t += part[r * nblk + k];
	if (sq)
		inv32[r] = 1.0f / sqrtf(t / (float)n + 1e-5f);
	else
		mu32[r] = t / (float)n;
}

/* each element's allowance: random rounding (g times its condition, g's sqrt(n) law stopping at
 * 2^16 terms) and three times the largest error of the plain orders, of the mean and of 1/std,
 * each in magnitude (reference.c says why); mu32 and inv32 hold N_ORDERS rows of `rows` */
__global__ static void error_terms(const float *x, const float *w, const float *b, float *t, long long n,
				   long long rows, const double *mean, const double *m2, const double *mabs,
				   const float *mu32, const float *inv32)
{
	long long row = blockIdx.y;
	double mu = mean[row], inv = rsqrt(m2[row] / (double)n + 1e-5), ma = mabs[row] / (double)n;
	double g = 2.0 * sqrt(fmin((double)n + 1, 65536.0)) / 16777216.0, dmu = 0, dinv = 0;
	for (int o = 0; o < N_ORDERS; o++) {
		dmu = fmax(dmu, fabs((double)mu32[o * rows + row] - mu) * inv);
		dinv = fmax(dinv, fabs((double)inv32[o * rows + row] / inv - 1.0));
	}
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
		double c = fabs((double)x[row * n + i] - mu) * inv, aw = fabs((double)w[i]);
		double rnd = g * ((c + ma * inv) * aw + fabs((double)b[i]));
		t[row * n + i] = (float)(rnd + 3.0 * (dmu + dinv * c) * aw);
	}
}

/* every order's mean and inverse deviation per row, in scratch of its own */
static int twin(const float *x, long long rows, long long n, cudaStream_t s, float **mu32, float **inv32)
{
	static float *scratch;
	static long long scratch_len;
	long long maxblk = (n + MIN_RUN - 1) / MIN_RUN, len = rows * maxblk + 2 * N_ORDERS * rows;
	if (len > scratch_len) {
		cudaFree(scratch);
		scratch_len = 0;
		if (cudaMalloc(&scratch, len * sizeof(float)) != cudaSuccess)
			return -12;
		scratch_len = len;
	}
	float *part = scratch + 2 * N_ORDERS * rows;
	*mu32 = scratch;
	*inv32 = scratch + N_ORDERS * rows;
	unsigned rblocks = (unsigned)((rows + 127) / 128);
	for (int o = 0; o < N_ORDERS; o++) {
		long long nblk = (n + orders[o].run - 1) / orders[o].run;
		dim3 grid((unsigned)((nblk + 127) / 128), (unsigned)rows);
		float *m = *mu32 + o * rows, *iv = *inv32 + o * rows;
		twin_partial<<<grid, 128, 0, s>>>(x, n, m, part, nblk, 0, orders[o]);
		twin_finish<<<rblocks, 128, 0, s>>>(part, nblk, n, rows, m, iv, 0);
		twin_partial<<<grid, 128, 0, s>>>(x, n, m, part, nblk, 1, orders[o]);
		twin_finish<<<rblocks, 128, 0, s>>>(part, nblk, n, rows, m, iv, 1);
	}
	return 0;
}

/* the row moments of x into scratch (mean, centred m2, sum|x|), then one pass over the elements:
 * the normalisation, or each element's allowance */
static int layernorm(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream, int terms)
{
	static double *scratch;
	static long long scratch_rows;
	if (n_in != 3 || n_out != 1 || in[0].ndim != 4)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	if (rows > scratch_rows) {
		cudaFree(scratch);
		scratch_rows = 0;
		if (cudaMalloc(&scratch, 3 * rows * sizeof(double)) != cudaSuccess)
			return -12;
		scratch_rows = rows;
	}
	double *mean = scratch, *m2 = scratch + rows, *mabs = scratch + 2 * rows;
	cudaMemsetAsync(scratch, 0, 3 * rows * sizeof(double), s);
	dim3 grid((unsigned)((n + CHUNK - 1) / CHUNK), (unsigned)rows);
	const float *x = (const float *)in[0].data;
	row_moment<<<grid, THREADS, 0, s>>>(x, n, mean, mean, 0);
	finish_mean<<<(unsigned)((rows + 255) / 256), 256, 0, s>>>(mean, n, rows);
	row_moment<<<grid, THREADS, 0, s>>>(x, n, mean, m2, 1);
	dim3 g2((unsigned)((n + 1023) / 1024 < 4096 ? (n + 1023) / 1024 : 4096), (unsigned)rows);
	const float *w = (const float *)in[1].data, *b = (const float *)in[2].data;
	if (terms) {
		float *mu32, *inv32;
		if (twin(x, rows, n, s, &mu32, &inv32))
			return -12;
		row_moment<<<grid, THREADS, 0, s>>>(x, n, mean, mabs, 2);
		error_terms<<<g2, 1024, 0, s>>>(x, w, b, (float *)out[0].data, n, rows, mean, m2, mabs, mu32, inv32);
	} else {
		normalise<<<g2, 1024, 0, s>>>(x, w, b, (float *)out[0].data, n, mean, m2);
	}
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	return layernorm(in, n_in, out, n_out, stream, 0);
}

int kg_error_terms(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	return layernorm(in, n_in, out, n_out, stream, 1);
}
