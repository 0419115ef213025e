/* Honest conv+ReLU+maxpool candidate: computes each pooled output directly from its 2x2 window of
 * convolutions (fused, no intermediate tensor), fp32 accumulation. */
#include <kgate/kernel.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 3 || n_out != 1)
		return -22;
	const float *x = in[0].data, *w = in[1].data, *bias = in[2].data;
	float *y = out[0].data;
	int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
	int64_t K = in[1].shape[0], R = in[1].shape[2], S = in[1].shape[3];
	int64_t PH = out[0].shape[2], PW = out[0].shape[3];
	for (int64_t n = 0; n < N; n++)
		for (int64_t k = 0; k < K; k++) {
			const float *wk = w + k * C * R * S;
			for (int64_t ph = 0; ph < PH; ph++)
				for (int64_t pw = 0; pw < PW; pw++) {
					float best = 0.0f;
					for (int64_t q = 0; q < 4; q++) {
						int64_t oh = 2 * ph + q / 2, ow = 2 * pw + q % 2;
						float acc = bias[k];
						for (int64_t c = 0; c < C; c++) {
							const float *xc = x + ((n * C + c) * H + oh) * W + ow;
							const float *wc = wk + c * R * S;
							for (int64_t r = 0; r < R; r++)
								for (int64_t s = 0; s < S; s++)
									acc += xc[r * W + s] * wc[r * S + s];
						}
						best = acc > best ? acc : best;
					}
					y[((n * K + k) * PH + ph) * PW + pw] = best;
				}
		}
	return 0;
}
