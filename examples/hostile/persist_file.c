/* Shortcut: persist results to disk and serve them on the next run. File I/O is not on the
 * policy's import list: static.forbidden_symbol (and the sandbox has no persistent writable path). */
#include <kgate/kernel.h>
#include <stdio.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	FILE *f = fopen("/tmp/kgate-cache.bin", "rb");
	if (f) {
		fread(out[0].data, sizeof(float), (size_t)(in[0].shape[0] * in[0].shape[1]), f);
		fclose(f);
	}
	return 0;
}
