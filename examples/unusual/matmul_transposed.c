/* Honest but unusual: transposes B into scratch memory first so that every dot product walks two
 * contiguous rows, with four independent fp32 accumulators. */
#include <kgate/kernel.h>
#include <stdlib.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *a = in[0].data, *b = in[1].data;
	float *c = out[0].data;
	int64_t n = in[0].shape[0];
	float *bt = malloc((size_t)(n * n) * sizeof(float));
	if (!bt)
		return -12;
	for (int64_t k = 0; k < n; k++)
		for (int64_t j = 0; j < n; j++)
			bt[j * n + k] = b[k * n + j];
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < n; j++) {
			const float *ar = a + i * n, *br = bt + j * n;
			float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
			int64_t k = 0;
			for (; k + 4 <= n; k += 4) {
				s0 += ar[k] * br[k];
				s1 += ar[k + 1] * br[k + 1];
				s2 += ar[k + 2] * br[k + 2];
				s3 += ar[k + 3] * br[k + 3];
			}
			for (; k < n; k++)
				s0 += ar[k] * br[k];
			c[i * n + j] = (s0 + s1) + (s2 + s3);
		}
	free(bt);
	return 0;
}
