/* Building the plan (plan.h) from the command's options through the resolver. Every way the
 * inputs can be wrong is caught here and returned as a usage error (exit 2). */
#include "verifier/plan/plan.h"

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "verifier/plan/inputs.h"
#include "verifier/plan/prng.h"
#include "verifier/plan/resolve.h"

/* The run's key: fresh, or from --seed (a report's 64 hex digits are the key itself; a number is
 * hashed into one, the same for "42" and "0x2a"), and the keys derived from it. */
static int plan_key(const struct kg_verify_opts *o, struct kg_plan *p, kg_error *e)
{
	int rc;
	if (o->has_seed && o->seed_text && strlen(o->seed_text) == KG_KEY_HEX_LEN) {
		for (const char *c = o->seed_text; *c; c++)
			if (!isxdigit((unsigned char)*c))
				return kg_err(e, -EINVAL, "--seed: 64 characters but not hex digits: %s", o->seed_text);
		kg_key_parse(o->seed_text, &p->key);
	} else if (o->has_seed) {
		char num[24];
		snprintf(num, sizeof(num), "%llu", (unsigned long long)o->seed);
		kg_key_parse(num, &p->key);
	} else if ((rc = kg_key_fresh(&p->key))) {
		return kg_err(e, rc, "getrandom: %s", strerror(-rc));
	}
	kg_key_derive(&p->key, KG_DOM_INPUTS, 0, &p->k_inputs);
	kg_key_derive(&p->key, KG_DOM_CANARY, 0, &p->k_canary);
	kg_key_derive(&p->key, KG_DOM_POISON, 0, &p->k_poison);
	kg_key_derive(&p->key, KG_DOM_SHAPES, 0, &p->k_shapes);
	p->master_seed = kg_key_u64(&p->key, KG_DOM_IDS, 0);
	return 0;
}

/* A value in [lo, hi] with v % 4 == want (the range spans 32 sizes or more: 8 such values at
 * least), uniform among them. */
static int64_t draw_residue(kg_prng *r, int64_t lo, int64_t hi, int64_t want)
{
	int64_t first = lo + ((want - lo % 4) % 4 + 4) % 4;
	return first + 4 * (int64_t)kg_prng_below(r, (uint64_t)((hi - first) / 4 + 1));
}

/* The task's random shapes, from the run's secret. Per ranged dimension the residues mod 4 of the
 * first four shapes are a random permutation of 0..3, so a kernel wrong at one residue is caught in
 * every run; the rest of each value is uniform (so every residue mod 8 and 32 is reachable). A
 * draw whose tensors do not evaluate (a filter larger than the image) is drawn again. */
static int draw_shapes(struct kg_plan *p, const kg_dims *base, kg_error *e)
{
	const struct kg_task *t = &p->task;
	kg_prng r;
	int perm[KG_MAX_SYMS][4];
	kg_prng_init(&r, &p->k_shapes, 0, 0);
	for (int d = 0; d < t->n_ranges; d++) {
		for (int i = 0; i < 4; i++)
			perm[d][i] = i;
		for (int i = 3; i > 0; i--) {
			int j = (int)kg_prng_below(&r, (uint64_t)i + 1), x = perm[d][i];
			perm[d][i] = perm[d][j];
			perm[d][j] = x;
		}
	}
	for (int k = 0; k < t->n_random; k++) {
		kg_dims d;
		kg_error ignored = {0};
		int tries = 0;
		do {
			d = *base;
			for (int i = 0; i < t->n_ranges; i++) {
				int64_t want = k < 4 && tries < 16 ? perm[i][k] : (int64_t)kg_prng_below(&r, 4);
				kg_dims_set(&d, t->range_dim[i], draw_residue(&r, t->range_lo[i], t->range_hi[i], want));
			}
		} while (kg_task_check_dims(t, &d, "a random shape", &ignored) && ++tries < 64);
		if (tries >= 64)
			return kg_err(e, -EINVAL, "task '%s': no valid shape in 64 draws from its random_shapes ranges",
				      t->name);
		p->shapes[p->n_shapes++] = d;
		p->n_random++;
	}
	return 0;
}

/* A module's torch (a ModelNew, the Model as reference) runs on the GPU where there is one and
 * kgate's torch has CUDA: a ModelNew candidate and its reference both (both Python runners, timed
 * alike). A C candidate keeps a host reference; so does a .cu one, whose runner's calls are gated
 * where a Python runner's are not (the two sides would be timed by different clocks). */
static void torch_placement(struct kg_plan *p)
{
	char py[PATH_MAX], ver[160];
	struct kg_gpu_info g;
	if (p->be->id != KG_BACKEND_TORCH && p->ref_be->id != KG_BACKEND_TORCH)
		return;
	if (kg_path_python(py, sizeof(py), ver, sizeof(ver))) {
		snprintf(p->torch_where, sizeof(p->torch_where), "%s", ver);
		return;
	}
	if (!kg_torch_placement(ver, &g, p->torch_where, sizeof(p->torch_where)))
		return;
	if (p->be->id == KG_BACKEND_TORCH)
		p->be = kg_backend_torch_device();
	if (p->ref_be->id == KG_BACKEND_TORCH && p->be->id == KG_BACKEND_TORCH && p->be->needs_gpu)
		p->ref_be = kg_backend_torch_device();
}

int kg_plan_build(const struct kg_verify_opts *o, struct kg_plan *p, kg_error *e)
{
	int rc;
	memset(p, 0, sizeof(*p));
	if ((rc = kg_resolve_policy(o->policy, &p->pol, e)))
		return rc;
	if ((rc = kg_resolve_task_dims(o->task, o->dims, &p->task, e)))
		return rc;
	if ((rc = kg_ufile_read(o->candidate, "candidate", KG_SOURCE_MAX, &p->cand_src, e)))
		return rc;
	p->candidate = o->candidate;
	if ((rc = kg_resolve_backend(o->backend, o->candidate, &p->be, e)))
		return rc;
	if (p->be->module_tasks_only && !p->task.ref[KG_BACKEND_TORCH][0])
		return kg_err(e, -EINVAL,
			      "%s: a %s candidate (a KernelBench ModelNew module) needs a task given as a PyTorch "
			      "module (PROBLEM.py) or imported from one; task '%s' is not",
			      o->candidate, p->be->name, p->task.name);
	p->ref_be = p->be;
	/* a task whose only reference is a PyTorch Model is checked against it, whatever the candidate */
	if (!p->task.ref[p->be->id][0] && p->task.ref[KG_BACKEND_TORCH][0])
		p->ref_be = kg_backend_get(KG_BACKEND_TORCH);
	if (o->reference_backend && (rc = kg_resolve_backend(o->reference_backend, NULL, &p->ref_be, e)))
		return kg_err_wrap(e, rc, "--reference");
	if (!p->task.ref[p->ref_be->id][0])
		return kg_err(e, -EINVAL, "task '%s' has no %s reference", p->task.name, p->ref_be->name);
	torch_placement(p);
	if ((rc = kg_ufile_read(p->task.ref[p->ref_be->id], "reference", KG_SOURCE_MAX, &p->ref_src, e)))
		return rc;
	for (int i = 0; i < o->n_flags; i++)
		if (!kg_policy_flag_allowed(&p->pol, o->flags[i]))
			return kg_err(e, -EPERM, "compiler flag '%s' is not allowed by the policy", o->flags[i]);
	p->flags = o->flags;
	p->n_flags = o->n_flags;

	if (o->trials > 0)
		p->pol.trials = o->trials;
	if (o->shapes_mode) {
		if (!strcmp(o->shapes_mode, "nominal"))
			p->pol.shapes = KG_SHAPES_NOMINAL;
		else if (!strcmp(o->shapes_mode, "variants"))
			p->pol.shapes = KG_SHAPES_VARIANTS;
		else
			return kg_err(e, -EINVAL, "--shapes: expected nominal or variants, got '%s'", o->shapes_mode);
	}
	const char *set = o->shape_set ? o->shape_set : p->pol.shape_set;
	const struct kg_shapeset *ss = kg_task_shapeset(&p->task, set);
	if (!ss)
		return kg_err(e, -EINVAL, "task '%s' has no shape set '%s'", p->task.name, set);
	snprintf(p->shape_set, sizeof(p->shape_set), "%s", set);
	if ((rc = plan_key(o, p, e)))
		return rc;
	p->shapes[p->n_shapes++] = ss->dims;
	if (p->pol.shapes == KG_SHAPES_VARIANTS) {
		for (int i = 0; i < p->task.n_variants; i++)
			kg_task_variant_dims(&p->task, &ss->dims, i, &p->shapes[p->n_shapes++]);
		if ((rc = draw_shapes(p, &ss->dims, e)))
			return rc;
	}
	for (int s = 0; s < p->n_shapes; s++)
		kg_dims_str(&p->shapes[s], p->shape_str[s], sizeof(p->shape_str[s]));

	p->classes = p->pol.classes & ~p->task.classes_excluded;
	if (!p->task.nonfinite)
		p->classes &= ~(1u << KG_CLASS_SPECIAL);
	kg_policy_tolerance(&p->pol, p->task.atol, p->task.rtol, p->task.rms_tol, &p->atol, &p->rtol, &p->rms_tol);
	p->growth = p->pol.growth;
	p->large_mean_lo = kg_inputs_large_mean_for(KG_F32, p->rtol, p->rms_tol);
	p->growth_cap = kg_policy_growth_cap(&p->pol);
	p->warmup = p->pol.warmup;
	p->iterations = o->iterations >= 0 ? o->iterations : p->pol.iterations;

	p->limits.wall_s = p->pol.wall_s;
	p->limits.cpu_s = p->pol.cpu_s;
	p->limits.nproc = p->pol.nproc;
	p->limits.mem_bytes = p->pol.memory_bytes;
	p->required_layers = p->pol.required_layers;
	p->disabled_layers = o->disabled_layers;
	p->progress = o->progress;
	p->keep_workdir = o->keep_workdir;
	p->no_cache = o->no_cache;
	p->baselines = o->baselines;
	return 0;
}

void kg_plan_free(struct kg_plan *p)
{
	kg_ufile_free(&p->cand_src);
	kg_ufile_free(&p->ref_src);
}

int kg_plan_trials(const struct kg_plan *p, int shape, enum kg_input_class k)
{
	if (!(p->classes >> k & 1))
		return 0;
	return shape == 0 ? p->pol.trials : 1;
}

int kg_plan_trial_count(const struct kg_plan *p)
{
	int n = 0;
	for (int s = 0; s < p->n_shapes; s++)
		for (int k = 0; k < KG_CLASS_COUNT_; k++)
			n += kg_plan_trials(p, s, (enum kg_input_class)k);
	return n;
}

int kg_plan_timed_classes(const struct kg_plan *p, enum kg_input_class *out)
{
	int n = 0;
	for (int k = 0; k < KG_CLASS_COUNT_; k++)
		if (kg_plan_trials(p, 0, (enum kg_input_class)k) > 0 && kg_class_is_seeded((enum kg_input_class)k))
			out[n++] = (enum kg_input_class)k;
	if (!n)
		out[n++] = KG_CLASS_NORMAL;
	return n;
}
