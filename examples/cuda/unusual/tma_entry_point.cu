/* Honest CUDA matmul with 2-D TMA tensor maps, as examples/cuda/matmul/tma.cu, but reaching the
 * driver's cuTensorMapEncodeTiled the way CUDA's own samples and CUTLASS do without linking libcuda:
 * through the runtime's cudaGetDriverEntryPointByVersion. That hands out any driver function by a
 * name no import table shows, and the CUDA backend refuses it unless the policy's
 * gpu.driver_entry_points says otherwise (static.forbidden_symbol, the key named); the encoders
 * imported by name are allowed by default (gpu.tensor_maps). Must pass where the policy lifts it
 * (tests/data/gpu-ci-entry.yaml). (Task: matmul.) */
#include <kgate/kernel.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

KG_CANDIDATE;

#define BM 64
#define BN 64
#define BK 32
#define THREADS 256

/* ---- the TMA path ---- */

/* one stage: A's 64 rows x 32 columns and B's 32 rows x 64 columns, as the tensor maps' boxes lay
 * them out (the inner dimension contiguous); 128-byte aligned, as the bulk copies want */
struct stage {
	float a[BM][BK];
	float b[BK][BN];
};

__device__ static inline uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ static inline void bar_init(uint64_t *bar, unsigned count)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
#endif
}

/* the barrier's current phase completes once `bytes` have arrived through the async proxy */
__device__ static inline void bar_expect(uint64_t *bar, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#endif
}

__device__ static inline void bar_wait(uint64_t *bar, unsigned parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	/* the label is local to the braces' block: one per inlined copy */
	asm volatile("{\n\t.reg .pred p;\n"
		     "KG_WAIT:\n\t"
		     "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
		     "@!p bra KG_WAIT;\n}" ::"r"(smem_addr(bar)),
		     "r"(parity)
		     : "memory");
#endif
}

/* the box at (c0 inner, c1 outer) of the tensor map into shared memory at dst, counted on bar */
__device__ static inline void tma_load(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
			     smem_addr(dst)),
		     "l"((uint64_t)(uintptr_t)map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
		     : "memory");
#endif
}

/* both slices of K-step kt into stage s, on its barrier (thread 0 alone) */
__device__ static inline void load_stage(struct stage *st, uint64_t *bar, const CUtensorMap *ma, const CUtensorMap *mb,
					 int kt, int row0, int col0)
{
	bar_expect(bar, (unsigned)sizeof(struct stage));
	tma_load(st->a, ma, kt * BK, row0, bar);
	tma_load(st->b, mb, col0, kt * BK, bar);
}

__global__ static void __launch_bounds__(THREADS) sgemm_tma(const __grid_constant__ CUtensorMap ma,
							     const __grid_constant__ CUtensorMap mb, float *C, int n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	__shared__ __align__(128) struct stage st[2];
	__shared__ __align__(8) uint64_t bar[2];
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	int nk = (n + BK - 1) / BK;
	if (threadIdx.x == 0) {
		bar_init(&bar[0], 1);
		bar_init(&bar[1], 1);
		/* the barriers' initialisation visible to the async proxy that completes them */
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		load_stage(&st[0], &bar[0], &ma, &mb, 0, row0, col0);
	}
	__syncthreads();
	float acc[4][4] = {{0}};
	for (int kt = 0; kt < nk; kt++) {
		int s = kt & 1;
		/* the next slices into the other stage, which every thread finished reading in the last
		 * step (the barrier at its end) */
		if (threadIdx.x == 0 && kt + 1 < nk)
			load_stage(&st[s ^ 1], &bar[s ^ 1], &ma, &mb, kt + 1, row0, col0);
		/* stage s's (kt / 2)-th fill: its phase of that parity */
		bar_wait(&bar[s], (unsigned)(kt >> 1) & 1u);
#pragma unroll 8
		for (int k = 0; k < BK; k++) {
			float a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++)
				a[i] = st[s].a[ty * 4 + i][k];
			float4 bv = *(const float4 *)&st[s].b[k][tx * 4];
			b[0] = bv.x;
			b[1] = bv.y;
			b[2] = bv.z;
			b[3] = bv.w;
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
			if (r < n && c < n)
				C[(long long)r * n + c] = acc[i][j];
		}
#else
	__trap(); /* never launched below sm_90 (kg_forward checks) */
#endif
}

/* ---- the plain tiled kernel, where TMA cannot be used ---- */

#define PK 16

__global__ static void sgemm_tiled(const float *A, const float *B, float *C, int n)
{
	__shared__ float As[PK][BM + 4], Bs[PK][BN + 4];
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	float acc[4][4] = {{0}};
	for (int k0 = 0; k0 < n; k0 += PK) {
		for (int i = threadIdx.x; i < BM * PK; i += THREADS) {
			int r = i / PK, k = i % PK;
			As[k][r] = (row0 + r < n && k0 + k < n) ? A[(long long)(row0 + r) * n + k0 + k] : 0.0f;
			int kk = i / BN, c = i % BN;
			Bs[kk][c] = (k0 + kk < n && col0 + c < n) ? B[(long long)(k0 + kk) * n + col0 + c] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < PK; k++) {
			float a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = As[k][ty * 4 + i];
				b[i] = Bs[k][tx * 4 + i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
			if (r < n && c < n)
				C[(long long)r * n + c] = acc[i][j];
		}
}

/* an n x n row-major fp32 matrix at p as a 2-D tensor map of box (box0 columns, box1 rows) */
static int encode(CUtensorMap *m, const float *p, int n, unsigned box0, unsigned box1)
{
	cuuint64_t dim[2] = {(cuuint64_t)n, (cuuint64_t)n};
	cuuint64_t stride[1] = {(cuuint64_t)n * sizeof(float)}; /* bytes from one row to the next */
	cuuint32_t box[2] = {box0, box1};
	cuuint32_t elem[2] = {1, 1};
	typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
				      const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
				      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
	static encode_fn fn;
	if (!fn) {
		void *f = NULL;
		enum cudaDriverEntryPointQueryResult q;
		if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) ||
		    q != cudaDriverEntryPointSuccess || !f)
			return -1;
		fn = (encode_fn)f;
	}
	return fn(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)p, dim, stride, box, elem,
				      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
				      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
		       ? 0
		       : -1;
}

/* sm_90 or later: the device's compute capability, read once */
static int has_tma(void)
{
	static int known = -1;
	if (known < 0) {
		int dev = 0, major = 0;
		known = !cudaGetDevice(&dev) && !cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) &&
			major >= 9;
	}
	return known;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 2 || n_out != 1)
		return -22;
	int n = (int)in[0].shape[0];
	const float *A = (const float *)in[0].data, *B = (const float *)in[1].data;
	float *C = (float *)out[0].data;
	cudaStream_t s = (cudaStream_t)stream;
	dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((n + BM - 1) / BM));
	CUtensorMap ma, mb;
	if (has_tma() && n % 4 == 0 && !((uintptr_t)A % 16) && !((uintptr_t)B % 16) && !encode(&ma, A, n, BK, BM) &&
	    !encode(&mb, B, n, BN, BK))
		sgemm_tma<<<grid, THREADS, 0, s>>>(ma, mb, C, n);
	else
		sgemm_tiled<<<grid, THREADS, 0, s>>>(A, B, C, n);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
