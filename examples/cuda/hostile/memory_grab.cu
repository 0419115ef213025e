/* Device memory is nobody's bound: a constructor that takes all the device's free memory at LOAD
 * (cudaMalloc in chunks until none is left), and an honest tiled matmul after it. The trusted
 * reference (cuBLAS) creates its handle and workspace at its first call, which came after the
 * candidate's LOAD: the handle's allocation failed, and kgate main 9500fee said "the reference
 * returned -5": exit 3, not verified, for the candidate's fault.
 * kgate now calls the reference at every shape before the candidate is loaded (its handle and
 * scratch exist by then), counts the device memory the candidate's process holds from kgate-device's
 * reading of the device's free memory before and after LOAD, and holds it to the policy's
 * gpu.memory_mb (8 GiB by default): sandbox.memory, at load. (Task: matmul.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

#define BM 64
#define BN 64
#define BK 16

__global__ static void sgemm(const float *A, const float *B, float *C, int n)
{
	__shared__ float As[BK][BM + 4], Bs[BK][BN + 4];
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	float acc[4][4] = {{0}};
	for (int k0 = 0; k0 < n; k0 += BK) {
		for (int i = threadIdx.x; i < BM * BK; i += 256) {
			int r = i / BK, k = i % BK;
			As[k][r] = (row0 + r < n && k0 + k < n) ? A[(long long)(row0 + r) * n + k0 + k] : 0.0f;
			int kk = i / BN, c = i % BN;
			Bs[kk][c] = (k0 + kk < n && col0 + c < n) ? B[(long long)(k0 + kk) * n + col0 + c] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < BK; k++)
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] += As[k][ty * 4 + i] * Bs[k][tx * 4 + j];
		__syncthreads();
	}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
			if (r < n && c < n)
				C[(long long)r * n + c] = acc[i][j];
		}
}

static void *held[4096];

/* LOAD: the kernel's module loaded first (its own launches need no memory later), then every
 * chunk the device will give, largest first */
__attribute__((constructor)) static void grab(void)
{
	struct cudaFuncAttributes a;
	cudaFuncGetAttributes(&a, sgemm);
	int n = 0;
	for (size_t chunk = 256u << 20; chunk >= (1u << 20); chunk /= 4)
		while (n < 4096 && cudaMalloc(&held[n], chunk) == cudaSuccess)
			n++;
	cudaGetLastError(); /* the last refusal is expected */
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 2 || n_out != 1)
		return -22;
	int n = (int)in[0].shape[0];
	dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((n + BM - 1) / BM));
	sgemm<<<grid, 256, 0, (cudaStream_t)stream>>>((const float *)in[0].data, (const float *)in[1].data,
						       (float *)out[0].data, n);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
