/* Timer tampering: find the runner's start event in its state (scanning its image from the return
 * address, as an attacker would) and re-record it on the given stream after the slow work, so the
 * events time nothing. The trusted clock (the parent's round trip, less a calibrated call that
 * does nothing) still holds the work: every call's claim falls short of it by over 1 ms and half
 * its span: timing.tampered. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

#include <stdint.h>

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

__global__ static void spin(long long ns)
{
	long long t0 = clock64();
	while (clock64() - t0 < ns * 2) /* ~2 GHz: ns * 2 cycles */
		;
}

/* The runner's sealed CUDA state holds the candidate's stream handle followed by the runner's
 * copy stream and its start and end events (runner/cuda.c). It lies in the runner's image, after
 * the code this call returns into: scan forward from there for the stream handle. */
static void **find_state(void *ret, void *stream)
{
	uintptr_t p = ((uintptr_t)ret + 7) & ~(uintptr_t)7;
	for (size_t i = 0; i < ((size_t)8 << 20) / 8; i++, p += 8) {
		void **w = (void **)p;
		if (w[0] == stream && w[1] && w[2] && w[3] && w[2] != w[3])
			return w;
	}
	return NULL;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out;
	cudaStream_t s = (cudaStream_t)stream;
	long long rows = in[0].shape[0], cols = in[0].shape[1], row0 = 0;
	spin<<<1, 1, 0, s>>>(3000000); /* 3 ms of work nobody should see */
	softmax<<<(unsigned)rows, 1024, 0, s>>>((const float *)in[0].data + row0 * cols, (float *)out[0].data + row0 * cols, cols);
	void **st = find_state(__builtin_return_address(0), stream);
	if (st)
		cudaEventRecord((cudaEvent_t)st[2], s); /* ev0, after the work */
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
