/* Building a candidate or a reference into a .so, inside the `compile` sandbox profile: the
 * compiler sees the toolchain, kgate's headers and its own scratch directory, nothing else. The
 * command line is the backend's (backend.h); a successful build is kept in the compile cache. */
#ifndef KG_COMPILE_H
#define KG_COMPILE_H

#include "kg_common.h"
#include "sandbox/sandbox.h"
#include "verifier/plan/backend.h"
#include "verifier/compile/cache.h"

struct kg_compile_opts {
	const struct kg_backend *be;
	const char *arch; /* GPU architecture ("90a"); NULL: the backend's default */
	const char *const *flags; /* extra flags, already checked against the policy */
	int n_flags;
	const char (*libs)[32]; /* libraries to link ("cublas" -> -lcublas): trusted references only */
	int n_libs;
	struct kg_sb_limits limits;
	unsigned required_layers, disabled_layers;
	struct kg_cache *cache; /* NULL: always compile */
};

struct kg_compile_result {
	int ok; /* the .so exists */
	struct kg_sb_outcome outcome; /* how the compiler ended */
	char log[8192]; /* compiler output, bounded */
	double seconds;
	int cached; /* the artifact and log came from the compile cache; the compiler did not run */
	char cache_note[300]; /* why the cache was not used or an entry was dropped; "" when nothing */
};

/* Compiles the source text (len bytes, as read by the trusted side) into workdir/out_name.
 * workdir must exist and be empty. With o->cache, the build is first looked up under the key of
 * the source, the command, the compiler, the architecture and kgate's headers (r->cached), and a
 * successful one is stored; a failed build is never cached (compile.c says why). Returns 0 when
 * the compiler ran or the cache answered (see r->ok for success), negative errno when it could
 * not be started. */
int kg_compile(const char *text, size_t len, const char *workdir, const char *out_name,
	       const struct kg_compile_opts *o, struct kg_compile_result *r, kg_error *e);

#endif
