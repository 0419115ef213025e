/* Shortcut: return at once and hope the output buffer still holds a right answer from an earlier
 * run (the reference's, in harnesses that reuse memory). kgate poisons outputs before every call:
 * check.unwritten_output. */
#include <kgate/kernel.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	return 0;
}
