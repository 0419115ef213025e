/* Tuner template (CUDA matmul): `kgate search matmul --agent tuner --template examples/tuner/matmul.cu`.
 * TILE x TILE output tiles per block, BK-wide K slices staged in shared memory, each thread a
 * TM x TM micro-tile in registers ((TILE/TM)^2 threads: 64 to 1024), the K loop unrolled UNROLL
 * times. Plain fp32 FFMA, no tensor cores. */
/* kgate:tune TILE = {64, 128} */
/* kgate:tune TM = {4, 8} */
/* kgate:tune BK = {8, 16, 32} */
/* kgate:tune UNROLL = {1, 4} */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

#ifndef TILE
#define TILE 64
#endif
#ifndef TM
#define TM 4
#endif
#ifndef BK
#define BK 16
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#define KG_UNROLL(n) KG_PRAGMA(unroll n)
#define TPD (TILE / TM) /* threads per dimension */
#define THREADS (TPD * TPD)

__global__ static void __launch_bounds__(THREADS) sgemm(const float *A, const float *B, float *C, int n)
{
	__shared__ float As[BK][TILE + 4], Bs[BK][TILE + 4];
	int tx = threadIdx.x % TPD, ty = threadIdx.x / TPD;
	int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
	float acc[TM][TM];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TM; j++)
			acc[i][j] = 0.0f;
	for (int k0 = 0; k0 < n; k0 += BK) {
		for (int i = threadIdx.x; i < TILE * BK; i += THREADS) {
			int r = i / BK, k = i % BK;
			As[k][r] = (row0 + r < n && k0 + k < n) ? A[(long long)(row0 + r) * n + k0 + k] : 0.0f;
			int kk = i / TILE, c = i % TILE;
			Bs[kk][c] = (k0 + kk < n && col0 + c < n) ? B[(long long)(k0 + kk) * n + col0 + c] : 0.0f;
		}
		__syncthreads();
		KG_UNROLL(UNROLL)
		for (int k = 0; k < BK; k++) {
			float a[TM], b[TM];
#pragma unroll
			for (int i = 0; i < TM; i++) {
				a[i] = As[k][ty * TM + i];
				b[i] = Bs[k][tx * TM + i];
			}
#pragma unroll
			for (int i = 0; i < TM; i++)
#pragma unroll
				for (int j = 0; j < TM; j++)
					acc[i][j] += a[i] * b[j];
		}
		__syncthreads();
	}
	for (int i = 0; i < TM; i++)
		for (int j = 0; j < TM; j++) {
			int r = row0 + ty * TM + i, c = col0 + tx * TM + j;
			if (r < n && c < n)
				C[(long long)r * n + c] = acc[i][j];
		}
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 2 || n_out != 1)
		return -22;
	int n = (int)in[0].shape[0];
	if (n == 0)
		return 0;
	dim3 grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((n + TILE - 1) / TILE));
	sgemm<<<grid, THREADS, 0, (cudaStream_t)stream>>>((const float *)in[0].data, (const float *)in[1].data,
							  (float *)out[0].data, n);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
