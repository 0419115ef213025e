/* Broken: does not compile (an LLM's truncated answer): compile.error, with the compiler's
 * message in the report. */
#include <kgate/kernel.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	for (int i = 0; i < n_in; i++
