/* Broken: defines kg_forward but not kg_abi_version (forgot KG_CANDIDATE), so kgate cannot tell
 * which ABI it was written against: load.error, before anything runs. */
#include <kgate/kernel.h>
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	return 0;
}
