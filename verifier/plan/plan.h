/* The plan of one verification: task, policy (with the command line's overrides), backends,
 * shapes (fixed variants and secret random ones), classes, tolerance, limits and the run's secret
 * key with the keys derived from it, resolved and validated once before any work, then read-only
 * for every phase. A usage error is found here, never halfway through. */
#ifndef KG_PLAN_H
#define KG_PLAN_H

#include <limits.h>
#include <stdint.h>

#include "kg_common.h"
#include "kg_ufile.h"
#include "kg_vocab.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/prng.h"
#include "verifier/plan/task.h"
#include "verifier/verify.h"

#define KG_PLAN_MAX_SHAPES (1 + KG_MAX_VARIANTS + KG_MAX_RANDOM_SHAPES)

struct kg_plan {
	struct kg_task task;
	struct kg_policy pol; /* the policy as loaded, with --trials and --shapes applied */
	const struct kg_backend *be; /* the candidate's */
	const struct kg_backend *ref_be; /* the reference's (the same, or cpu with --reference cpu) */
	/* where a module's torch runs (kg_torch_placement's words): "NVIDIA H100 ..., torch 2.11.0 ..."
	 * when on the GPU, else why not; "" where no torch side runs */
	char torch_where[200];
	enum kg_baselines baselines; /* the options' (verify.h) */
	const char *candidate;
	struct kg_ufile cand_src, ref_src; /* read once each through kg_ufile: what is compiled */
	const char *const *flags;
	int n_flags;
	char shape_set[32];
	int n_shapes;
	kg_dims shapes[KG_PLAN_MAX_SHAPES]; /* [0] is the base shape, the variants, the random shapes */
	int n_random; /* the last n_random shapes were drawn from the task's ranges */
	char shape_str[KG_PLAN_MAX_SHAPES][128];
	unsigned classes; /* the policy's minus the task's exclusions; special only where defined */
	double atol, rtol, rms_tol; /* the task's, widened by the policy's precision */
	double growth, growth_cap; /* the reduction-length term's factor and cap (verifier/judge/compare.h) */
	/* the large_mean class's |mean| lower bound for this task's fp32 tensors, sized to its bounds
	 * (kg_inputs_large_mean_for) */
	double large_mean_lo;
	int warmup, iterations;
	struct kg_sb_limits limits; /* the run sandboxes' */
	unsigned required_layers, disabled_layers;
	/* The run's secret: 256 bits from getrandom (or from --seed), printed in the report after the
	 * run as its seed. Every key below is derived from it; the candidate sees none of them. */
	kg_key key;
	kg_key k_inputs; /* per trial: kg_key_derive(k_inputs, KG_DOM_INPUTS, trial id) */
	kg_key k_canary, k_poison; /* guard-band words and poison patterns, independent of inputs */
	kg_key k_shapes; /* the random shapes' draws */
	/* The base of trial ids (a PRF output, not a secret): ids only tell trials apart. */
	uint64_t master_seed;
	int progress, keep_workdir;
	int no_cache;
};

/* Resolves and checks everything; -errno with e set for a usage or configuration error. The
 * candidate and the reference are read here (kg_ufile: no links, regular, capped): a bad file is
 * exit 2 before any work. kg_plan_free releases them (also after a failed build). */
int kg_plan_build(const struct kg_verify_opts *o, struct kg_plan *p, kg_error *e);
void kg_plan_free(struct kg_plan *p);
/* How many seeds the correctness phase runs of class k at shape s: the policy's trials at the base
 * shape; one at every variant and random shape (every class on every shape). */
int kg_plan_trials(const struct kg_plan *p, int shape, enum kg_input_class k);
/* Every correctness trial of the plan. */
int kg_plan_trial_count(const struct kg_plan *p);
/* The classes timed calls draw from, in table order, into out (KG_CLASS_COUNT_ entries); how many.
 * Those the base shape is checked on whose inputs depend on the trial's key (kg_class_is_seeded):
 * a timed call of zeros, ones or identity would repeat inputs an earlier call saw, so a cache keyed
 * on their content would serve it. normal (which every policy runs) when none is left. */
int kg_plan_timed_classes(const struct kg_plan *p, enum kg_input_class *out);

#endif
