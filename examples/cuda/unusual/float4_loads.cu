/* Honest, unusual: 16-byte vectorised loads and stores (float4) where a row starts 16-byte aligned
 * and its length is a multiple of 4, a scalar path elsewhere (every residue of C mod 4 occurs in a
 * run). One block per row, two passes (max, then sum), a third writes. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

KG_CANDIDATE;

__device__ static float block_reduce(float v, int is_max, float *sh)
{
	for (int o = 16; o > 0; o >>= 1) {
		float w = __shfl_xor_sync(0xffffffffu, v, o);
		v = is_max ? fmaxf(v, w) : v + w;
	}
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	int nw = blockDim.x >> 5;
	v = threadIdx.x < nw ? sh[threadIdx.x] : (is_max ? -INFINITY : 0.0f);
	if (threadIdx.x < 32)
		for (int o = 16; o > 0; o >>= 1) {
			float w = __shfl_xor_sync(0xffffffffu, v, o);
			v = is_max ? fmaxf(v, w) : v + w;
		}
	if (threadIdx.x == 0)
		sh[0] = v;
	__syncthreads();
	return sh[0];
}

__global__ static void softmax_vec(const float *x, float *y, long long cols)
{
	__shared__ float sh[32];
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	int vec = cols % 4 == 0 && ((uintptr_t)xr & 15) == 0 && ((uintptr_t)yr & 15) == 0;
	long long nv = vec ? cols / 4 : 0;
	const float4 *xv = (const float4 *)xr;
	float4 *yv = (float4 *)yr;
	float m = -INFINITY;
	int nan = 0;
	for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
		float4 a = xv[i];
		nan |= isnan(a.x) | isnan(a.y) | isnan(a.z) | isnan(a.w);
		m = fmaxf(fmaxf(m, fmaxf(a.x, a.y)), fmaxf(a.z, a.w));
	}
	for (long long c = 4 * nv + threadIdx.x; c < cols; c += blockDim.x) {
		nan |= isnan(xr[c]);
		m = fmaxf(m, xr[c]);
	}
	nan = __syncthreads_or(nan);
	m = block_reduce(m, 1, sh);
	float s = 0.0f;
	if (m != INFINITY) {
		for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
			float4 a = xv[i];
			s += expf(a.x - m) + expf(a.y - m) + expf(a.z - m) + expf(a.w - m);
		}
		for (long long c = 4 * nv + threadIdx.x; c < cols; c += blockDim.x)
			s += expf(xr[c] - m);
	}
	s = block_reduce(s, 0, sh);
	float inv = 1.0f / s;
	for (long long i = threadIdx.x; i < nv; i += blockDim.x) {
		float4 a = xv[i], b;
		b.x = nan ? NAN : expf(a.x - m) * inv;
		b.y = nan ? NAN : expf(a.y - m) * inv;
		b.z = nan ? NAN : expf(a.z - m) * inv;
		b.w = nan ? NAN : expf(a.w - m) * inv;
		yv[i] = b;
	}
	for (long long c = 4 * nv + threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = nan ? NAN : expf(xr[c] - m) * inv;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	softmax_vec<<<(unsigned)in[0].shape[0], 512, 0, (cudaStream_t)stream>>>((const float *)in[0].data,
										 (float *)out[0].data, in[0].shape[1]);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
