/* Building the plan (plan.h) from the command's options through the resolver. Every way the
 * inputs can be wrong is caught here and returned as a usage error (exit 2). */
#include "verifier/plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "verifier/prng.h"
#include "verifier/resolve.h"

int kg_plan_build(const struct kg_verify_opts *o, struct kg_plan *p, kg_error *e)
{
	int rc;
	memset(p, 0, sizeof(*p));
	if ((rc = kg_resolve_policy(o->policy, &p->pol, e)) || (rc = kg_resolve_task(o->task, &p->task, e)))
		return rc;
	if ((rc = kg_ufile_read(o->candidate, "candidate", KG_SOURCE_MAX, &p->cand_src, e)))
		return rc;
	p->candidate = o->candidate;
	if ((rc = kg_resolve_backend(o->backend, o->candidate, &p->be, e)))
		return rc;
	p->ref_be = p->be;
	if (o->reference_backend && (rc = kg_resolve_backend(o->reference_backend, NULL, &p->ref_be, e)))
		return kg_err_wrap(e, rc, "--reference");
	if (!p->task.ref[p->ref_be->id][0])
		return kg_err(e, -EINVAL, "task '%s' has no %s reference", p->task.name, p->ref_be->name);
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
	p->shapes[p->n_shapes++] = ss->dims;
	if (p->pol.shapes == KG_SHAPES_VARIANTS)
		for (int i = 0; i < p->task.n_variants; i++)
			kg_task_variant_dims(&p->task, &ss->dims, i, &p->shapes[p->n_shapes++]);
	for (int s = 0; s < p->n_shapes; s++)
		kg_dims_str(&p->shapes[s], p->shape_str[s], sizeof(p->shape_str[s]));

	p->classes = p->pol.classes & ~p->task.classes_excluded;
	if (!p->task.nonfinite)
		p->classes &= ~(1u << KG_CLASS_SPECIAL);
	kg_policy_tolerance(&p->pol, p->task.atol, p->task.rtol, p->task.rms_tol, &p->atol, &p->rtol, &p->rms_tol);
	p->growth = p->pol.growth;
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
	if (o->has_seed)
		p->master_seed = o->seed;
	else if ((rc = kg_seed_fresh(&p->master_seed)))
		return kg_err(e, rc, "getrandom: %s", strerror(-rc));
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
	if (shape == 0)
		return p->pol.trials;
	return k == KG_CLASS_NORMAL || k == KG_CLASS_UNIFORM;
}

int kg_plan_trial_count(const struct kg_plan *p)
{
	int n = 0;
	for (int s = 0; s < p->n_shapes; s++)
		for (int k = 0; k < KG_CLASS_COUNT_; k++)
			n += kg_plan_trials(p, s, (enum kg_input_class)k);
	return n;
}
