/* Shortcut: look up and call somebody else's implementation (the reference, a library) through
 * dlsym instead of computing. The import is refused before anything runs:
 * static.forbidden_symbol. */
#include <kgate/kernel.h>
#include <dlfcn.h>
KG_CANDIDATE;
typedef int (*fwd_t)(const kg_tensor *, int, kg_tensor *, int, void *);
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	void *h = dlopen("/kgate/lib/reference.so", RTLD_NOW);
	fwd_t f = h ? (fwd_t)dlsym(h, "kg_forward") : 0;
	return f ? f(in, n_in, out, n_out, stream) : -1;
}
