/* Honest block for tests/data/kernelbench/conv2d_relu_bias.py. Inputs in kgate's order: x
 * [N, Cin, H, W], then the Model's state_dict: bias [Cout, 1, 1] (its own parameter comes first),
 * conv.weight [Cout, Cin, K, K], conv.bias [Cout]. y = relu(conv(x) + conv.bias) + bias. */
#include <kgate/kernel.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 4 || n_out != 1 || in[2].ndim != 4)
		return -22;
	const float *x = in[0].data, *bias = in[1].data, *w = in[2].data, *cb = in[3].data;
	float *y = out[0].data;
	int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
	int64_t O = in[2].shape[0], K = in[2].shape[2], OH = H - K + 1, OW = W - K + 1;
	for (int64_t n = 0; n < N; n++)
		for (int64_t o = 0; o < O; o++)
			for (int64_t i = 0; i < OH; i++)
				for (int64_t j = 0; j < OW; j++) {
					double acc = cb[o];
					for (int64_t c = 0; c < C; c++)
						for (int64_t p = 0; p < K; p++)
							for (int64_t q = 0; q < K; q++)
								acc += (double)x[((n * C + c) * H + i + p) * W + j + q] *
								       w[((o * C + c) * K + p) * K + q];
					y[((n * O + o) * OH + i) * OW + j] = (float)((acc > 0 ? acc : 0) + bias[o]);
				}
	return 0;
}
