/* Honest CUDA conv+ReLU+maxpool: one thread per pooled output computes its 2x2 window of
 * convolutions in fp32 and keeps the maximum, clamped at zero. */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

__global__ static void fused(const float *__restrict__ x, const float *__restrict__ w, const float *__restrict__ bias,
			     float *y, int N, int C, int H, int W, int K, int R, int S, int PH, int PW)
{
	long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (idx >= (long long)N * K * PH * PW)
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
			for (int r = 0; r < R; r++)
				for (int s = 0; s < S; s++)
					acc += xc[r * W + s] * wc[r * S + s];
		}
		best = fmaxf(best, acc);
	}
	y[idx] = best;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 3 || n_out != 1)
		return -22;
	int N = (int)in[0].shape[0], C = (int)in[0].shape[1], H = (int)in[0].shape[2], W = (int)in[0].shape[3];
	int K = (int)in[1].shape[0], R = (int)in[1].shape[2], S = (int)in[1].shape[3];
	int PH = (int)out[0].shape[2], PW = (int)out[0].shape[3];
	long long total = (long long)N * K * PH * PW;
	fused<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
		(const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data, (float *)out[0].data, N, C,
		H, W, K, R, S, PH, PW);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
