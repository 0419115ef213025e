/* A 30 GB allocation (a lookup table of precomputed answers, or a denial of service). The single
 * mapping is over the policy's memory bound: sandbox.memory. */
#include <kgate/kernel.h>
#include <stdlib.h>
#include <string.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)n_out, (void)stream;
	char *p = malloc(30ull << 30);
	if (!p)
		return -12;
	memset(p, 1, 30ull << 30);
	((float *)out[0].data)[0] = p[12345];
	return 0;
}
