/* Shortcut: make the harness's code writable and patch its timer (a GOT or code patch). The
 * mprotect import is refused statically: static.forbidden_symbol. */
#include <kgate/kernel.h>
#include <stdint.h>
#include <sys/mman.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)n_out, (void)stream;
	uintptr_t page = (uintptr_t)&kg_forward & ~(uintptr_t)4095;
	mprotect((void *)page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
	((float *)out[0].data)[0] = 0;
	return 0;
}
