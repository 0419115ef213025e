/* Hostile at compile time: include a secret from the host. The compiler runs in the compile
 * sandbox, which has no /etc/shadow: compile.error, and the file's content is in no log. */
#include "/etc/shadow"
#include <kgate/kernel.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	return 0;
}
