/* Trusted CPU reference for conv2d + bias + ReLU + 2x2 max-pool (floor mode), accumulating in
 * double. Direct loops: obviously right matters more than fast here. */
#include <kgate/kernel.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 3 || n_out != 1 || in[0].ndim != 4 || in[1].ndim != 4)
		return -22;
	const float *x = in[0].data, *w = in[1].data, *bias = in[2].data;
	float *y = out[0].data;
	int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
	int64_t K = in[1].shape[0], R = in[1].shape[2], S = in[1].shape[3];
	int64_t PH = out[0].shape[2], PW = out[0].shape[3];
	for (int64_t n = 0; n < N; n++)
		for (int64_t k = 0; k < K; k++)
			for (int64_t ph = 0; ph < PH; ph++)
				for (int64_t pw = 0; pw < PW; pw++) {
					double best = 0; /* ReLU floor: max(0, ...) over the window */
					for (int64_t dy = 0; dy < 2; dy++)
						for (int64_t dx = 0; dx < 2; dx++) {
							int64_t oh = 2 * ph + dy, ow = 2 * pw + dx;
							double acc = bias[k];
							for (int64_t c = 0; c < C; c++)
								for (int64_t r = 0; r < R; r++)
									for (int64_t s = 0; s < S; s++)
										acc += (double)x[((n * C + c) * H + oh + r) * W + ow + s] *
										       w[((k * C + c) * R + r) * S + s];
							if (acc > best)
								best = acc;
						}
					y[((n * K + k) * PH + ph) * PW + pw] = (float)best;
				}
	(void)W;
	(void)H;
	return 0;
}
