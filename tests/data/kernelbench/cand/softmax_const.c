/* Dishonest softmax for a module task: the uniform answer 1/C everywhere (right for constant rows
 * only). */
#include <kgate/kernel.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)n_out, (void)stream;
	float *y = out[0].data;
	int64_t n = out[0].shape[0] * out[0].shape[1];
	for (int64_t i = 0; i < n; i++)
		y[i] = 1.0f / (float)out[0].shape[1];
	return 0;
}
