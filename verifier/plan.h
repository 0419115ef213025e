/* The plan of one verification: task, policy (with the command line's overrides), backends,
 * shapes, classes, tolerance, limits and the master seed, resolved and validated once before any
 * work, then read-only for every phase. A usage error is found here, never halfway through. */
#ifndef KG_PLAN_H
#define KG_PLAN_H

#include <limits.h>
#include <stdint.h>

#include "kg_common.h"
#include "kg_ufile.h"
#include "kg_vocab.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "verifier/backend.h"
#include "verifier/task.h"
#include "verifier/verify.h"

#define KG_PLAN_MAX_SHAPES (1 + KG_MAX_VARIANTS)

struct kg_plan {
	struct kg_task task;
	struct kg_policy pol; /* the policy as loaded, with --trials and --shapes applied */
	const struct kg_backend *be; /* the candidate's */
	const struct kg_backend *ref_be; /* the reference's (the same, or cpu with --reference cpu) */
	const char *candidate;
	struct kg_ufile cand_src, ref_src; /* read once each through kg_ufile: what is compiled */
	const char *const *flags;
	int n_flags;
	char shape_set[32];
	int n_shapes;
	kg_dims shapes[KG_PLAN_MAX_SHAPES]; /* [0] is the base shape, then the variants over it */
	char shape_str[KG_PLAN_MAX_SHAPES][128];
	unsigned classes; /* the policy's minus the task's exclusions; special only where defined */
	double atol, rtol, rms_tol; /* the task's, widened by the policy's precision */
	double growth, growth_cap; /* the reduction-length term's lambda and cap (verifier/compare.h) */
	int warmup, iterations;
	struct kg_sb_limits limits; /* the run sandboxes' */
	unsigned required_layers, disabled_layers;
	uint64_t master_seed; /* --seed, else fresh from getrandom */
	int progress, keep_workdir;
};

/* Resolves and checks everything; -errno with e set for a usage or configuration error. The
 * candidate and the reference are read here (kg_ufile: no links, regular, capped): a bad file is
 * exit 2 before any work. kg_plan_free releases them (also after a failed build). */
int kg_plan_build(const struct kg_verify_opts *o, struct kg_plan *p, kg_error *e);
void kg_plan_free(struct kg_plan *p);
/* How many seeds the correctness phase runs of class k at shape s: the policy's trials at the base
 * shape; variant shapes test coverage, one trial each of the normal and uniform classes. */
int kg_plan_trials(const struct kg_plan *p, int shape, enum kg_input_class k);
/* Every correctness trial of the plan. */
int kg_plan_trial_count(const struct kg_plan *p);

#endif
