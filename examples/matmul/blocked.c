/* Honest matmul candidate: cache-blocked i-k-j loops with fp32 accumulation into the output. */
#include <kgate/kernel.h>
#include <string.h>

KG_CANDIDATE;

#define BLK 64

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 2 || n_out != 1)
		return -22;
	const float *a = in[0].data, *b = in[1].data;
	float *c = out[0].data;
	int64_t n = in[0].shape[0];
	memset(c, 0, (size_t)(n * n) * sizeof(float));
	for (int64_t i0 = 0; i0 < n; i0 += BLK)
		for (int64_t k0 = 0; k0 < n; k0 += BLK)
			for (int64_t j0 = 0; j0 < n; j0 += BLK) {
				int64_t i1 = i0 + BLK < n ? i0 + BLK : n;
				int64_t k1 = k0 + BLK < n ? k0 + BLK : n;
				int64_t j1 = j0 + BLK < n ? j0 + BLK : n;
				for (int64_t i = i0; i < i1; i++)
					for (int64_t k = k0; k < k1; k++) {
						float aik = a[i * n + k];
						for (int64_t j = j0; j < j1; j++)
							c[i * n + j] += aik * b[k * n + j];
					}
			}
	return 0;
}
