/* A kernel that never returns (a hang, or a stall tactic). The per-call deadline kills the whole
 * sandbox: sandbox.timeout. */
#include <kgate/kernel.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)n_out, (void)stream;
	volatile float *y = out[0].data;
	for (;;)
		y[0] += 1.0f;
	return 0;
}
