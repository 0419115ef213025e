/* Honest masked cumulative sum for tests/data/kernelbench/masked_cumsum.py, in C: x [B, L] f32 and
 * mask [B, L] bool in; y [B, L] f32 (the running sum of x where mask) and pos [B, L] bool (y > 0)
 * out. What a C candidate sees of a bool tensor: dtype KG_BOOL, one byte an element, 0 or 1. It
 * refuses (returns nonzero) a task that hands it anything else. */
#include <kgate/kernel.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 2 || n_out != 2 || in[0].dtype != KG_F32 || in[1].dtype != KG_BOOL || out[0].dtype != KG_F32 ||
	    out[1].dtype != KG_BOOL || in[1].ndim != 2 || kg_numel(&in[1]) != kg_numel(&out[1]))
		return -22;
	const float *x = in[0].data;
	const unsigned char *mask = in[1].data;
	float *y = out[0].data;
	unsigned char *pos = out[1].data;
	int64_t rows = in[0].shape[0], len = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float acc = 0.0f; /* in the order torch.cumsum adds */
		for (int64_t i = r * len; i < (r + 1) * len; i++) {
			if (mask[i] > 1)
				return -34; /* a bool is 0 or 1 */
			acc += x[i] * (float)mask[i];
			y[i] = acc;
			pos[i] = acc > 0.0f;
		}
	}
	return 0;
}
