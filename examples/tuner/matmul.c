/* Tuner template (CPU matmul): `kgate search matmul --agent tuner --template examples/tuner/matmul.c`.
 * Cache-blocked i-k-j loops: TILE x TILE blocks, and ROWS rows of A at a time inside a block so
 * that one row of B is reused ROWS times while it is in cache. fp32 accumulation into C. */
/* kgate:tune TILE = {16, 32, 64, 128} */
/* kgate:tune ROWS = {1, 2, 4} */
#include <kgate/kernel.h>
#include <string.h>

KG_CANDIDATE;

#ifndef TILE
#define TILE 64
#endif
#ifndef ROWS
#define ROWS 2
#endif

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 2 || n_out != 1)
		return -22;
	const float *a = in[0].data, *b = in[1].data;
	float *c = out[0].data;
	int64_t n = in[0].shape[0];
	memset(c, 0, (size_t)(n * n) * sizeof(float));
	for (int64_t i0 = 0; i0 < n; i0 += TILE)
		for (int64_t k0 = 0; k0 < n; k0 += TILE)
			for (int64_t j0 = 0; j0 < n; j0 += TILE) {
				int64_t i1 = i0 + TILE < n ? i0 + TILE : n;
				int64_t k1 = k0 + TILE < n ? k0 + TILE : n;
				int64_t j1 = j0 + TILE < n ? j0 + TILE : n;
				for (int64_t i = i0; i < i1; i += ROWS) {
					int64_t ie = i + ROWS < i1 ? i + ROWS : i1;
					for (int64_t k = k0; k < k1; k++) {
						const float *bk = b + k * n;
						for (int64_t ii = i; ii < ie; ii++) {
							float aik = a[ii * n + k];
							float *ci = c + ii * n;
							for (int64_t j = j0; j < j1; j++)
								ci[j] += aik * bk[j];
						}
					}
				}
			}
	return 0;
}
