/* Tuner template (CUDA softmax): `kgate search softmax --agent tuner --template examples/tuner/softmax.cu`.
 * ROWS rows per block, one after another; BLOCK threads keep a running (max, sum) pair each
 * (online softmax), merged across the block; loads and stores VEC floats wide where a row is
 * aligned for it (scalar otherwise, and for a row's tail); strided loops unrolled UNROLL times. */
/* kgate:tune BLOCK = {128, 256, 512, 1024} */
/* kgate:tune ROWS = {1, 2} */
/* kgate:tune VEC = {1, 4} */
/* kgate:tune UNROLL = {1, 4} */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

#ifndef BLOCK
#define BLOCK 1024
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#define KG_UNROLL(n) KG_PRAGMA(unroll n)

#if VEC == 4
typedef float4 vec_t;
#elif VEC == 2
typedef float2 vec_t;
#else
typedef float1 vec_t;
#endif

__device__ static void merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	s = (m == -INFINITY ? 0.0f : s * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm));
	m = mm;
}

__device__ static void add(float &m, float &s, int &nan, float v)
{
	nan |= isnan(v);
	if (v > m) {
		s = (m == -INFINITY ? 0.0f : s * __expf(m - v));
		m = v;
	}
	s += __expf(v - m);
}

__global__ static void __launch_bounds__(BLOCK) softmax(const float *x, float *y, long long rows, long long cols)
{
	__shared__ float sm[32], ss[32];
	__shared__ int snan;
	for (int rr = 0; rr < ROWS; rr++) {
		long long row = (long long)blockIdx.x * ROWS + rr;
		if (row >= rows) /* the same for every thread of the block */
			break;
		const float *xr = x + row * cols;
		float *yr = y + row * cols;
		/* vector accesses only where both rows are aligned for them */
		int aligned = ((uintptr_t)xr % (VEC * sizeof(float))) == 0 && ((uintptr_t)yr % (VEC * sizeof(float))) == 0;
		long long nv = aligned ? cols / VEC : 0;
		float m = -INFINITY, s = 0.0f;
		int nan = 0;
		KG_UNROLL(UNROLL)
		for (long long c = threadIdx.x; c < nv; c += BLOCK) {
			vec_t v = ((const vec_t *)xr)[c];
			const float *f = (const float *)&v;
			for (int i = 0; i < VEC; i++)
				add(m, s, nan, f[i]);
		}
		for (long long c = nv * VEC + threadIdx.x; c < cols; c += BLOCK)
			add(m, s, nan, xr[c]);
		for (int o = 16; o > 0; o >>= 1)
			merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
		if ((threadIdx.x & 31) == 0) {
			sm[threadIdx.x >> 5] = m;
			ss[threadIdx.x >> 5] = s;
		}
		nan = __syncthreads_or(nan);
		if (threadIdx.x < 32) {
			int nw = BLOCK >> 5;
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
		KG_UNROLL(UNROLL)
		for (long long c = threadIdx.x; c < nv; c += BLOCK) {
			vec_t v = ((const vec_t *)xr)[c];
			float *f = (float *)&v;
			for (int i = 0; i < VEC; i++)
				f[i] = nan ? NAN : __expf(f[i] - m) * inv;
			((vec_t *)yr)[c] = v;
		}
		for (long long c = nv * VEC + threadIdx.x; c < cols; c += BLOCK)
			yr[c] = nan ? NAN : __expf(xr[c] - m) * inv;
		__syncthreads(); /* sm, ss and snan are rewritten for the next row */
	}
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	long long rows = in[0].shape[0], cols = in[0].shape[1];
	if (rows == 0)
		return 0;
	softmax<<<(unsigned)((rows + ROWS - 1) / ROWS), BLOCK, 0, (cudaStream_t)stream>>>(
		(const float *)in[0].data, (float *)out[0].data, rows, cols);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
