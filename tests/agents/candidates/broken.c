/* A candidate that does not compile: a missing semicolon and an undeclared name, so the search
 * must record compile.error and feed the compiler's message back to the agent. */
#include <kgate/kernel.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	float *y = out[0].data
	y[0] = undeclared_value;
	return 0;
}
