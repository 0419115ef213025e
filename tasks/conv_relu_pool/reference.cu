/* Trusted CUDA reference for conv2d + bias + ReLU + 2x2 max-pool: one thread per pooled output,
 * direct loops, double accumulation, exactly the C reference's arithmetic. */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

__global__ static void conv_relu_pool(const float *x, const float *w, const float *bias, float *y, int N, int C, int H,
				      int W, int K, int R, int S, int PH, int PW)
{
	long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	long long total = (long long)N * K * PH * PW;
	if (idx >= total)
		return;
	int pw = (int)(idx % PW), ph = (int)(idx / PW % PH), k = (int)(idx / ((long long)PW * PH) % K);
	int n = (int)(idx / ((long long)PW * PH * K));
	double best = 0;
	for (int q = 0; q < 4; q++) {
		int oh = 2 * ph + q / 2, ow = 2 * pw + q % 2;
		double acc = bias[k];
		for (int c = 0; c < C; c++)
			for (int r = 0; r < R; r++)
				for (int s = 0; s < S; s++)
					acc += (double)x[(((long long)n * C + c) * H + oh + r) * W + ow + s] *
					       w[(((long long)k * C + c) * R + r) * S + s];
		best = acc > best ? acc : best;
	}
	y[idx] = (float)best;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 3 || n_out != 1 || in[0].ndim != 4 || in[1].ndim != 4)
		return -22;
	int N = (int)in[0].shape[0], C = (int)in[0].shape[1], H = (int)in[0].shape[2], W = (int)in[0].shape[3];
	int K = (int)in[1].shape[0], R = (int)in[1].shape[2], S = (int)in[1].shape[3];
	int PH = (int)out[0].shape[2], PW = (int)out[0].shape[3];
	long long total = (long long)N * K * PH * PW;
	conv_relu_pool<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
		(const float *)in[0].data, (const float *)in[1].data, (const float *)in[2].data, (float *)out[0].data, N, C,
		H, W, K, R, S, PH, PW);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
