/* Tuner template (CUDA conv+ReLU+maxpool): `kgate search conv_relu_pool --agent tuner --template
 * examples/tuner/conv_relu_pool.cu`. Each thread computes PER_THREAD pooled outputs (BLOCK apart,
 * so that neighbouring threads stay on neighbouring outputs), each the maximum of its 2x2 window
 * of fp32 convolutions clamped at zero; the filter loops unrolled UNROLL times. */
/* kgate:tune BLOCK = {64, 128, 256, 512} */
/* kgate:tune PER_THREAD = {1, 2, 4} */
/* kgate:tune UNROLL = {1, 4} */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef PER_THREAD
#define PER_THREAD 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#define KG_UNROLL(n) KG_PRAGMA(unroll n)

__global__ static void __launch_bounds__(BLOCK)
	fused(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ bias, float *y, int N,
	      int C, int H, int W, int K, int R, int S, int PH, int PW)
{
	long long total = (long long)N * K * PH * PW;
	long long base = (long long)blockIdx.x * BLOCK * PER_THREAD + threadIdx.x;
	for (int t = 0; t < PER_THREAD; t++) {
		long long idx = base + (long long)t * BLOCK;
		if (idx >= total)
			return;
		int pw = (int)(idx % PW), ph = (int)(idx / PW % PH), k = (int)(idx / ((long long)PW * PH) % K);
		int n = (int)(idx / ((long long)PW * PH * K));
		float best = 0.0f;
		for (int q = 0; q < 4; q++) {
			int oh = 2 * ph + q / 2, ow = 2 * pw + q % 2;
			float acc = bias[k];
			for (int c = 0; c < C; c++) {
				const float *xc = x + (((long long)n * C + c) * H + oh) * W + ow;
				const float *wc = w + ((long long)k * C + c) * R * S;
				for (int r = 0; r < R; r++) {
					KG_UNROLL(UNROLL)
					for (int s = 0; s < S; s++)
						acc += xc[r * W + s] * wc[r * S + s];
				}
			}
			best = fmaxf(best, acc);
		}
		y[idx] = best;
	}
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 3 || n_out != 1)
		return -22;
	int N = (int)in[0].shape[0], C = (int)in[0].shape[1], H = (int)in[0].shape[2], W = (int)in[0].shape[3];
	int K = (int)in[1].shape[0], R = (int)in[1].shape[2], S = (int)in[1].shape[3];
	int PH = (int)out[0].shape[2], PW = (int)out[0].shape[3];
	long long total = (long long)N * K * PH * PW;
	if (total == 0)
		return 0;
	long long per_block = (long long)BLOCK * PER_THREAD;
	fused<<<(unsigned)((total + per_block - 1) / per_block), BLOCK, 0, (cudaStream_t)stream>>>(
		(const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data, (float *)out[0].data, N, C,
		H, W, K, R, S, PH, PW);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
