/* kg_verify as a sequence of phases over one resolved plan: plan, device, build (compile and
 * static checks), sandboxes, correctness (every class and shape), timing (fresh inputs, each call
 * re-checked), compute-sanitizer runs, verdict. The candidate never sees a seed or a reference. */
#include "verifier/steps.h"
#include "verifier/verify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kg_heartbeat.h"
#include "verifier/plan/resolve.h"
#include "verifier/phases/phases.h"
#include "verifier/run.h"

/* What the verdict says of its inputs, before anything runs. */
static void describe_plan(const struct kg_plan *p, struct kg_verdict *v)
{
	snprintf(v->task, sizeof(v->task), "%s", p->task.name);
	snprintf(v->candidate, sizeof(v->candidate), "%s", p->candidate);
	snprintf(v->backend, sizeof(v->backend), "%s", p->be->name);
	snprintf(v->policy, sizeof(v->policy), "%s", p->pol.path[0] ? p->pol.path : "(built-in defaults)");
	snprintf(v->shape_set, sizeof(v->shape_set), "%s", p->shape_set);
	snprintf(v->dims, sizeof(v->dims), "%s", p->shape_str[0]);
	v->master_seed = p->master_seed;
	kg_key_hex(&p->key, v->seed_key); /* read only after the run, when the candidate is gone */
}

/* The device a GPU backend needs, and the tools the policy asks of it; 0 to go on. */
static int device_phase(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	if (!p->be->needs_gpu && !p->ref_be->needs_gpu) {
		snprintf(r->v->device, sizeof(r->v->device), "%s", p->be->name);
		return 0;
	}
	const struct kg_backend *gb = p->be->needs_gpu ? p->be : p->ref_be;
	gb->probe(&r->gpu);
	snprintf(r->v->device, sizeof(r->v->device), "%s", r->gpu.present ? r->gpu.name : "no GPU");
	if (!r->gpu.present && p->pol.gpu_required) {
		kg_run_internal(r, "not verified: no GPU (%s); the candidate did not run", r->gpu.why);
		return -1;
	}
	if (p->be->needs_gpu && r->gpu.present && p->pol.compute_sanitizer &&
	    kg_path_compute_sanitizer(r->sanitizer, sizeof(r->sanitizer))) {
		kg_run_internal(r, "the policy asks for compute-sanitizer runs, and none was found (looked under "
				   "$CUDA_HOME and /usr/local/cuda; set KGATE_COMPUTE_SANITIZER)");
		return -1;
	}
	return 0;
}

static int make_workdir(struct kg_run *r, kg_error *e)
{
	int rc = kg_mkdtemp(r->work, sizeof(r->work), "kgate", e);
	if (rc)
		return rc;
	/* the sandboxed compiler runs as an unprivileged id: its scratch dirs must be reachable */
	chmod(r->work, 0755);
	return 0;
}

/* Sandboxes for both sides; 0 when both are up and the candidate is loaded. */
static int sessions_phase(struct kg_run *r)
{
	if ((r->plan->be->needs_gpu || r->plan->ref_be->needs_gpu) && !r->gpu.present) {
		/* only reachable when the policy says a GPU is optional: compile and static checks ran
		 * (and found nothing to reject), the candidate never did: never accepted, whatever the
		 * policy says, but exit 3 "not verified" */
		kg_verdict_add_check(r->v, "runtime", KG_CHECK_SKIP, 0, "no GPU (%s): the candidate did not run", r->gpu.why);
		kg_run_internal(r, "not verified: no GPU (%s); the candidate compiled but did not run", r->gpu.why);
		return -1;
	}
	kg_run_progress(r, "starting the sandboxes");
	uint64_t t0 = kg_now_ns();
	kg_phase_start(r);
	r->v->t_reference_s = kg_run_secs_since(t0);
	return kg_run_ok(r) ? 0 : -1;
}

/* A module task's inputs in kg_forward's order, for a rejection to name: a kernel written for the
 * order the Model's constructor suggests gets the weights wrong. */
static void input_order(struct kg_run *r)
{
	const struct kg_task *t = &r->plan->task;
	struct kg_verdict *v = r->v;
	size_t n = 0;
	for (int i = 0; i < t->n_inputs && n < sizeof(v->input_order); i++) {
		char shape[200] = "";
		for (int d = 0, m = 0; d < t->inputs[i].ndim; d++)
			m += snprintf(shape + m, sizeof(shape) - (size_t)m, "%s%s", d ? "," : "", t->inputs[i].dim[d]);
		n += (size_t)snprintf(v->input_order + n, sizeof(v->input_order) - n, "%s%s [%s]", i ? ", " : "",
				      t->inputs[i].name, shape);
	}
}

/* A module task's constants (get_inputs()'s numbers), for every report to show. */
static void constants(struct kg_run *r)
{
	const struct kg_task *t = &r->plan->task;
	struct kg_verdict *v = r->v;
	size_t n = 0;
	for (int i = 0; i < t->n_consts && n < sizeof(v->constants); i++) {
		const struct kg_const *c = &t->consts[i];
		n += (size_t)snprintf(v->constants + n, sizeof(v->constants) - n, "%s%s=%s (%s, argument %d)", i ? ", " : "",
				      c->name, c->value, c->type == 'i' ? "int" : c->type == 'f' ? "float" : "bool", c->at);
	}
}

static void finish(struct kg_run *r, uint64_t t_start)
{
	struct kg_verdict *v = r->v;
	kg_phase_baselines(r); /* while the candidate's arena is still there */
	if (r->plan->ref_be->id == KG_BACKEND_TORCH)
		input_order(r);
	constants(r);
	if (r->cs_up)
		kg_session_close(&r->cs);
	if (r->rs_up)
		kg_session_close(&r->rs);
	if (r->cs_up && r->cs.sb) {
		char fl[256];
		kg_sb_layers_str(r->cs.outcome.layers_failed, fl, sizeof(fl));
		snprintf(v->layers_failed, sizeof(v->layers_failed), "%s", fl);
	}
	if (r->plan->progress == KG_PROGRESS_LINE)
		fprintf(stderr, "\r\033[K");
	v->t_total_s = kg_run_secs_since(t_start);
	kg_verdict_finish(v);
}

int kg_verify(const struct kg_verify_opts *o, struct kg_verdict *v, kg_error *e)
{
	uint64_t t_start = kg_now_ns();
	struct kg_plan *plan = calloc(1, sizeof(*plan));
	struct kg_run *r = calloc(1, sizeof(*r));
	int rc = 0;
	kg_verdict_init(v);
	if (!plan || !r) {
		rc = kg_err(e, -ENOMEM, "out of memory");
		goto out;
	}
	r->ra.fd = r->ca.fd = -1;
	r->shape = -1;
	r->plan = plan;
	r->v = v;
	if ((rc = kg_plan_build(o, plan, e)))
		goto out;
	describe_plan(plan, v);
	if (device_phase(r))
		goto done;
	if ((rc = make_workdir(r, e)) || (rc = kg_run_alloc(r, e)))
		goto out;
	if (!kg_phase_build(r) || sessions_phase(r))
		goto done;
	kg_phase_correctness(r);
	if (kg_run_ok(r))
		kg_phase_timing(r);
	else /* whose fault it was decides the words: a failure of kgate's own is not the candidate's */
		kg_verdict_add_check(v, "timing", KG_CHECK_SKIP, 0, "%s",
				     v->internal_error[0] ? "not run: kgate could not finish the correctness trials"
							  : "skipped: the candidate failed its checks");
	kg_phase_sanitizers(r);
done:
	finish(r, t_start);
	kg_steps_print();
out:
	if (r) {
		kg_run_free(r);
		if (r->work[0] && !plan->keep_workdir)
			kg_rmtree(r->work);
		else if (r->work[0]) /* --keep is asked for to look inside: always say where */
			fprintf(stderr, "[kgate] work directory kept: %s\n", r->work);
	}
	free(r);
	if (plan)
		kg_plan_free(plan);
	free(plan);
	return rc;
}
