/* Trusted CPU reference for the square matmul: i-k-j loop order accumulating each output row in
 * double, which is both cache-friendly and more precise than any fp32 candidate. */
#include <kgate/kernel.h>
#include <stdlib.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 2 || n_out != 1 || in[0].ndim != 2)
		return -22;
	const float *a = in[0].data, *b = in[1].data;
	float *c = out[0].data;
	int64_t n = in[0].shape[0];
	double *acc = malloc((size_t)n * sizeof(double));
	if (!acc)
		return -12;
	for (int64_t i = 0; i < n; i++) {
		for (int64_t j = 0; j < n; j++)
			acc[j] = 0;
		for (int64_t k = 0; k < n; k++) {
			double aik = a[i * n + k];
			const float *brow = b + k * n;
			for (int64_t j = 0; j < n; j++)
				acc[j] += aik * brow[j];
		}
		for (int64_t j = 0; j < n; j++)
			c[i * n + j] = (float)acc[j];
	}
	free(acc);
	return 0;
}
