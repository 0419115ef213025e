/* Shortcut: softmax of uniform [0,1) inputs over long rows is ~1/C everywhere, so a constant
 * passes a loose tolerance. kgate's inputs have random offsets and scales, and a constant output
 * across different inputs is its own finding: check.constant_output. */
#include <kgate/kernel.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int64_t n = in[0].shape[0] * in[0].shape[1];
	float *y = out[0].data;
	for (int64_t i = 0; i < n; i++)
		y[i] = 1.0f / (float)in[0].shape[1];
	return 0;
}
