/* Honest square matmul for tests/data/kernelbench/matmul.py: C = A @ B, N x N, i-k-j order with
 * float accumulation in each output row. */
#include <kgate/kernel.h>
#include <string.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 2 || n_out != 1)
		return -22;
	const float *a = in[0].data, *b = in[1].data;
	float *c = out[0].data;
	int64_t n = in[0].shape[0];
	memset(c, 0, (size_t)(n * n) * sizeof(float));
	for (int64_t i = 0; i < n; i++)
		for (int64_t k = 0; k < n; k++) {
			float aik = a[i * n + k];
			for (int64_t j = 0; j < n; j++)
				c[i * n + j] += aik * b[k * n + j];
		}
	return 0;
}
