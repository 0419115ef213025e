/* A hostile candidate: computes nothing and zeroes its input so that a harness comparing against
 * a reference recomputed from the (now zero) input would see a match. kgate keeps its own copy
 * of the inputs and must reject it (check.input_modified, and the output is wrong anyway). */
#include <kgate/kernel.h>
#include <string.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int64_t n = kg_numel(&in[0]), cols = in[0].shape[1];
	memset(in[0].data, 0, (size_t)n * sizeof(float));
	float *y = out[0].data;
	for (int64_t i = 0; i < n; i++)
		y[i] = 1.0f / (float)cols;
	return 0;
}
