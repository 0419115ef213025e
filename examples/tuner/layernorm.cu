/* Tuner template (CUDA LayerNorm): `kgate search layernorm --agent tuner --template examples/tuner/layernorm.cu`.
 * Each row is split over blocks of THREADS threads, ITEMS elements per thread; every block reduces
 * its slice to a Welford triple, a second kernel merges them per row (Chan et al.), a third
 * normalises, VEC floats wide where every tensor is aligned for it. */
/* kgate:tune THREADS = {128, 256, 512} */
/* kgate:tune ITEMS = {8, 32, 128} */
/* kgate:tune VEC = {1, 4} */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <stdint.h>

KG_CANDIDATE;

#ifndef THREADS
#define THREADS 256
#endif
#ifndef ITEMS
#define ITEMS 32
#endif
#ifndef VEC
#define VEC 4
#endif
#define PER_BLOCK ((long long)THREADS * ITEMS)

#if VEC == 4
typedef float4 vec_t;
#elif VEC == 2
typedef float2 vec_t;
#else
typedef float1 vec_t;
#endif

struct welford {
	float n, mean, m2;
};

__device__ static welford combine(welford a, welford b)
{
	float n = a.n + b.n;
	if (n == 0.0f)
		return a;
	float d = b.mean - a.mean, wb = b.n / n;
	welford r = {n, a.mean + d * wb, a.m2 + b.m2 + d * d * a.n * wb};
	return r;
}

__global__ static void __launch_bounds__(THREADS) partial(const float *x, long long n, welford *parts,
							  int blocks_per_row)
{
	__shared__ welford sh[THREADS / 32];
	long long row = blockIdx.y;
	const float *xr = x + row * n;
	long long lo = (long long)blockIdx.x * PER_BLOCK, hi = lo + PER_BLOCK < n ? lo + PER_BLOCK : n;
	welford w = {0, 0, 0};
	for (long long i = lo + threadIdx.x; i < hi; i += THREADS) {
		float v = xr[i];
		w.n += 1.0f;
		float d = v - w.mean;
		w.mean += d / w.n;
		w.m2 += d * (v - w.mean);
	}
	for (int o = 16; o > 0; o >>= 1) {
		welford u = {__shfl_xor_sync(0xffffffffu, w.n, o), __shfl_xor_sync(0xffffffffu, w.mean, o),
			     __shfl_xor_sync(0xffffffffu, w.m2, o)};
		w = combine(w, u);
	}
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = w;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int k = 1; k < THREADS / 32; k++)
			w = combine(w, sh[k]);
		parts[row * blocks_per_row + blockIdx.x] = w;
	}
}

__global__ static void finish(const welford *parts, int blocks_per_row, float2 *stats, long long n)
{
	long long row = blockIdx.x;
	if (threadIdx.x == 0) {
		welford w = {0, 0, 0};
		for (int k = 0; k < blocks_per_row; k++)
			w = combine(w, parts[row * blocks_per_row + k]);
		stats[row] = make_float2(w.mean, rsqrtf(w.m2 / (float)n + 1e-5f));
	}
}

__global__ static void normalise(const float *x, const float *wt, const float *b, float *y, long long n,
				 const float2 *stats, int vec)
{
	long long row = blockIdx.y;
	float2 st = stats[row];
	long long stride = (long long)gridDim.x * blockDim.x;
	long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	long long nv = vec ? n / VEC : 0;
	for (long long i = first; i < nv; i += stride) {
		vec_t xv = ((const vec_t *)(x + row * n))[i], wv = ((const vec_t *)wt)[i], bv = ((const vec_t *)b)[i];
		float *xf = (float *)&xv;
		const float *wf = (const float *)&wv, *bf = (const float *)&bv;
		for (int k = 0; k < VEC; k++)
			xf[k] = (xf[k] - st.x) * st.y * wf[k] + bf[k];
		((vec_t *)(y + row * n))[i] = xv;
	}
	for (long long i = nv * VEC + first; i < n; i += stride)
		y[row * n + i] = (x[row * n + i] - st.x) * st.y * wt[i] + b[i];
}

static int aligned(const void *p)
{
	return ((uintptr_t)p % (VEC * sizeof(float))) == 0;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	static void *scratch;
	static size_t scratch_bytes;
	if (n_in != 3 || n_out != 1)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], n = in[0].shape[1] * in[0].shape[2] * in[0].shape[3];
	if (rows == 0 || n == 0)
		return 0;
	int bpr = (int)((n + PER_BLOCK - 1) / PER_BLOCK);
	size_t need = (size_t)(rows * bpr) * sizeof(welford) + (size_t)rows * sizeof(float2) + 16;
	if (need > scratch_bytes) {
		cudaFree(scratch);
		scratch_bytes = 0;
		if (cudaMalloc(&scratch, need) != cudaSuccess)
			return -12;
		scratch_bytes = need;
	}
	welford *parts = (welford *)scratch;
	float2 *stats = (float2 *)((char *)scratch + (((size_t)(rows * bpr) * sizeof(welford) + 15) & ~(size_t)15));
	partial<<<dim3((unsigned)bpr, (unsigned)rows), THREADS, 0, s>>>((const float *)in[0].data, n, parts, bpr);
	finish<<<(unsigned)rows, 32, 0, s>>>(parts, bpr, stats, n);
	/* Every row starts aligned only when n is a multiple of VEC. */
	int vec = n % VEC == 0 && aligned(in[0].data) && aligned(in[1].data) && aligned(in[2].data) &&
		  aligned(out[0].data);
	long long per = vec ? n / VEC : n;
	unsigned gx = (unsigned)((per + 1023) / 1024 < 2048 ? (per + 1023) / 1024 : 2048);
	normalise<<<dim3(gx ? gx : 1, (unsigned)rows), 1024, 0, s>>>((const float *)in[0].data, (const float *)in[1].data,
								    (const float *)in[2].data, (float *)out[0].data, n,
								    stats, vec);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
