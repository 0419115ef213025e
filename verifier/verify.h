/* kg_verify: the whole verification of one candidate against one task under one policy, from
 * compiling to the verdict. The CLI, the search loop and the tests all go through here. */
#ifndef KG_VERIFY_H
#define KG_VERIFY_H

#include <stdint.h>

#include "kg_common.h"
#include "verifier/judge/verdict.h"

enum { KG_PROGRESS_NONE = 0, KG_PROGRESS_LINE = 1, KG_PROGRESS_HEARTBEAT = 2 };

/* KG_BASELINES_AUTO: $KGATE_BASELINES (all, eager, none), else every baseline beside a device
 * candidate, a module task's eager beside a host one (a manifest task's torch baseline on the host
 * only when asked: a torch process a run) */
enum kg_baselines { KG_BASELINES_AUTO = 0, KG_BASELINES_NONE, KG_BASELINES_EAGER, KG_BASELINES_ALL };

struct kg_verify_opts {
	const char *task; /* name, manifest path, or a KernelBench-format module (PROBLEM.py) */
	const char *candidate; /* source: .c (CPU backend) or .cu (CUDA backend) */
	const char *policy; /* name or path; NULL: "default" if found, else built-in defaults */
	const char *backend; /* "cpu", "cuda"; NULL: from the candidate's extension */
	const char *reference_backend; /* "cpu" runs the C reference even for a CUDA candidate (used
					* to check the CUDA references themselves); NULL: same as backend */
	const char *shape_set; /* overrides the policy's */
	const char *dims; /* a module task's constants, "N=64,D=128" (verifier/plan/torchtask.h); NULL: its own */
	const char *shapes_mode; /* "nominal" | "variants": overrides the policy's */
	const char *const *flags; /* compiler flags asked for; each must be allowed by the policy */
	int n_flags;
	uint64_t seed; /* with has_seed and no seed_text: a number the run's key is derived from */
	const char *seed_text; /* with has_seed: a report's 64 hex digits (the key), or a number */
	int has_seed;
	int trials; /* > 0 overrides the policy */
	int iterations; /* >= 0 overrides the policy (0: no timing) */
	unsigned disabled_layers; /* sandbox layers not to attempt */
	int progress; /* on stderr: KG_PROGRESS_LINE (a terminal) or _HEARTBEAT (the caller runs
		       * kg_heartbeat, common/kg_heartbeat.h); 0 none */
	int keep_workdir;
	int no_cache; /* compile without the compile cache (verifier/compile/cache.h), neither read nor written */
	/* which baselines are timed beside a candidate whose timing passed (verifier/phases/baseline.c) */
	enum kg_baselines baselines;
};

/* Runs the verification and fills v (exit_code says accepted / rejected / internal error).
 * Returns a negative errno only for usage or configuration errors (exit 2), e.g. an unknown task,
 * a malformed policy, a missing candidate file; e says what. */
int kg_verify(const struct kg_verify_opts *o, struct kg_verdict *v, kg_error *e);

#endif
