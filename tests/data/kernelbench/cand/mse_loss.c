/* Honest mean squared error for tests/data/kernelbench/mse_loss.py, in C: predictions and targets
 * [B, D] f32 in, a scalar out. What a C candidate sees of a scalar: ndim 0, one element (kg_numel
 * gives 1). It refuses (returns nonzero) a task that hands it anything else. The sum in double. */
#include <kgate/kernel.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 2 || n_out != 1 || out[0].ndim != 0 || kg_numel(&out[0]) != 1 || in[0].ndim != 2 ||
	    kg_numel(&in[0]) != kg_numel(&in[1]))
		return -22;
	const float *p = in[0].data, *t = in[1].data;
	int64_t n = kg_numel(&in[0]);
	double acc = 0;
	for (int64_t i = 0; i < n; i++)
		acc += ((double)p[i] - t[i]) * ((double)p[i] - t[i]);
	*(float *)out[0].data = (float)(acc / (double)n);
	return 0;
}
