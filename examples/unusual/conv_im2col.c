/* Honest but unusual: im2col into scratch memory, a plain GEMM against the filters, then ReLU and
 * the 2x2 max-pool over the GEMM's output. */
#include <kgate/kernel.h>
#include <stdlib.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data, *w = in[1].data, *bias = in[2].data;
	float *y = out[0].data;
	int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
	int64_t K = in[1].shape[0], R = in[1].shape[2], S = in[1].shape[3];
	int64_t OH = H - R + 1, OW = W - S + 1, PH = out[0].shape[2], PW = out[0].shape[3];
	int64_t CRS = C * R * S, P = OH * OW;
	float *col = malloc((size_t)(CRS * P) * sizeof(float)), *conv = malloc((size_t)(K * P) * sizeof(float));
	if (!col || !conv) {
		free(col);
		free(conv);
		return -12;
	}
	for (int64_t n = 0; n < N; n++) {
		for (int64_t c = 0; c < C; c++)
			for (int64_t r = 0; r < R; r++)
				for (int64_t s = 0; s < S; s++)
					for (int64_t oh = 0; oh < OH; oh++)
						for (int64_t ow = 0; ow < OW; ow++)
							col[((c * R + r) * S + s) * P + oh * OW + ow] =
								x[((n * C + c) * H + oh + r) * W + ow + s];
		for (int64_t k = 0; k < K; k++) {
			for (int64_t p = 0; p < P; p++)
				conv[k * P + p] = bias[k];
			for (int64_t q = 0; q < CRS; q++) {
				float wk = w[k * CRS + q];
				for (int64_t p = 0; p < P; p++)
					conv[k * P + p] += wk * col[q * P + p];
			}
		}
		for (int64_t k = 0; k < K; k++)
			for (int64_t ph = 0; ph < PH; ph++)
				for (int64_t pw = 0; pw < PW; pw++) {
					float best = 0;
					for (int64_t q = 0; q < 4; q++) {
						float v = conv[k * P + (2 * ph + q / 2) * OW + 2 * pw + q % 2];
						best = v > best ? v : best;
					}
					y[((n * K + k) * PH + ph) * PW + pw] = best;
				}
	}
	free(col);
	free(conv);
	return 0;
}
