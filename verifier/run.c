/* A run's lifetime: its buffers and both arenas (a paged one for host runners, laid out for every
 * shape before they start; a flat one a device runner's keeper mirrors), the two runner sessions
 * and kgate-device where a side runs on a device, the layout of one shape, and the teardown. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/dtype.h"
#include "verifier/resolve.h"
#include "verifier/prof.h"
#include "verifier/run.h"
#include "verifier/timing.h"

int kg_run_alloc(struct kg_run *r, kg_error *e)
{
	const struct kg_plan *p = r->plan;
	const struct kg_task *t = &p->task;
	uint64_t maxb[2 * KG_RUN_MAX_T] = {0}, layout_max = 0;
	size_t pin[KG_PLAN_MAX_SHAPES], pout[KG_PLAN_MAX_SHAPES];
	for (int i = 0; i < t->n_inputs + t->n_outputs; i++)
		r->names[i] = i < t->n_inputs ? t->inputs[i].name : t->outputs[i - t->n_inputs].name;
	for (int s = 0; s < p->n_shapes; s++) {
		uint64_t b[2 * KG_RUN_MAX_T];
		for (int i = 0; i < t->n_inputs + t->n_outputs; i++) {
			const struct kg_tensor_spec *sp = i < t->n_inputs ? &t->inputs[i] : &t->outputs[i - t->n_inputs];
			int64_t shape[KG_MAX_DIMS];
			int rc = kg_task_shape(sp, &p->shapes[s], shape, e);
			if (rc)
				return rc;
			b[i] = (uint64_t)kg_shape_numel(sp->ndim, shape) * kg_dtype_size(sp->dtype);
			if (b[i] > maxb[i])
				maxb[i] = b[i];
		}
		uint64_t need = kg_arena_size_for(b, t->n_inputs + t->n_outputs);
		/* a paged arena gives each shape a region of its own, laid out before the runner starts */
		kg_arena_paged_size_for(b, t->n_inputs, t->n_outputs, &pin[s], &pout[s]);
		if (need > layout_max)
			layout_max = need;
	}
	for (int i = 0; i < t->n_inputs; i++)
		if (!(r->shadow[i] = malloc(maxb[i] ? maxb[i] : 1)))
			return kg_err(e, -ENOMEM, "out of memory for inputs (%llu bytes)", (unsigned long long)maxb[i]);
	/* the look-ahead's copy is an optimisation: without the memory, trials run one by one */
	for (int i = 0; i < t->n_inputs; i++)
		if (!(r->shadow_next[i] = malloc(maxb[i] ? maxb[i] : 1))) {
			for (int k = 0; k <= i; k++) {
				free(r->shadow_next[k]);
				r->shadow_next[k] = NULL;
			}
			break;
		}
	for (int j = 0; j < t->n_outputs; j++) {
		uint64_t b = maxb[t->n_inputs + j] ? maxb[t->n_inputs + j] : 1;
		if (!(r->refout[j] = malloc(b)) || !(r->snap[j] = malloc(b)) ||
		    (t->outputs[j].terms && !(r->terms[j] = malloc(b))))
			return kg_err(e, -ENOMEM, "out of memory for outputs (%llu bytes)", (unsigned long long)b);
	}
	/* host-resident runners get the paged arena (read-only inputs, guard pages); a device runner
	 * mirrors the flat one on the device */
	int rc = p->ref_be->needs_gpu ? kg_arena_create(&r->ra, layout_max, e)
				      : kg_arena_create_paged(&r->ra, p->n_shapes, pin, pout, e);
	if (!rc)
		rc = p->be->needs_gpu ? kg_arena_create(&r->ca, layout_max, e)
				      : kg_arena_create_paged(&r->ca, p->n_shapes, pin, pout, e);
	if (!rc) {
		kg_arena_set_keys(&r->ra, &p->k_canary, &p->k_poison);
		kg_arena_set_keys(&r->ca, &p->k_canary, &p->k_poison);
	}
	/* every shape's tensor pages, for the runners' page maps: nothing is mapped after they start */
	struct kg_arena *both[2] = {&r->ra, &r->ca};
	for (int k = 0; k < 2 && !rc; k++) {
		if (!both[k]->paged)
			continue;
		for (int sh = 0; sh < p->n_shapes && !rc; sh++)
			if (!(rc = kg_run_layout(r, sh, both[k], e)))
				kg_arena_map_region(both[k]);
		if (!rc)
			rc = kg_arena_map_seal(both[k], e);
	}
	r->shape = -1;
	return rc;
}


void kg_run_free(struct kg_run *r)
{
	kg_run_ahead_drop(r);
	if (r->cs_up)
		kg_session_free(&r->cs);
	if (r->rs_up)
		kg_session_free(&r->rs);
	r->cs_up = r->rs_up = 0;
	kg_keeper_stop(&r->keeper); /* after the runners: their imported arenas went with them */
	r->state_path[0] = '\0';
	kg_arena_destroy(&r->ra);
	kg_arena_destroy(&r->ca);
	for (int i = 0; i < KG_RUN_MAX_T; i++) {
		free(r->shadow[i]);
		free(r->shadow_next[i]);
		r->shadow_next[i] = NULL;
		free(r->refout[i]);
		free(r->snap[i]);
		free(r->terms[i]);
		r->shadow[i] = r->refout[i] = r->snap[i] = r->terms[i] = NULL;
	}
}

void kg_run_start_sessions(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	kg_error e = {0};
	struct kg_session_opts so = {
		.limits = p->limits,
		.required_layers = p->required_layers,
		.disabled_layers = p->disabled_layers,
		.call_timeout_s = 60,
	};
	if (getenv("KGATE_SANITIZE"))
		so.limits.mem_bytes = KG_SB_MEM_UNBOUNDED; /* ASan reserves terabytes of shadow */
	if (p->ref_be->needs_gpu || p->be->needs_gpu) {
		char dev[PATH_MAX];
		int krc = kg_path_device(dev, sizeof(dev));
		uint64_t t0 = kg_now_ns();
		krc = krc ? krc : kg_keeper_start(&r->keeper, dev, &e);
		kg_prof_add(KG_PROF_KEEPER_UP, t0);
		if (krc) {
			kg_run_internal(r, "starting kgate-device (the keeper of the device's memory): %s",
					krc ? "not found beside kgate-run (install kgate, or set KGATE_DEVICE)" : e.msg);
			return;
		}
		so.keeper = &r->keeper;
		/* room for batched timed calls where both sides run on the device and the keeper draws
		 * and judges there (KGATE_NO_BATCH=1: one call a measurement, to compare) */
		const uint32_t all = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP | KG_DEV_CAP_CHECK;
		const char *nb = getenv("KGATE_NO_BATCH");
		if (p->ref_be->needs_gpu && p->be->needs_gpu && p->iterations > 0 && (r->keeper.caps & all) == all &&
		    !(nb && *nb == '1')) {
			size_t cap = r->ra.capacity > r->ca.capacity ? r->ra.capacity : r->ca.capacity;
			r->batch_stride = ((uint64_t)cap + 4095) / 4096 * 4096;
			r->batch_room = kg_timing_batch_room(r->keeper.mem_bytes, r->batch_stride);
			so.dev_sets = r->batch_room;
			so.dev_stride = r->batch_stride;
		}
	}
	/* Reference: trusted code, the same sandbox; threads allowed (a reference may use them). */
	so.be = p->ref_be;
	so.so_path = r->ref_so;
	so.state_file = r->state_path[0] ? r->state_path : NULL;
	so.threads = 1;
	uint64_t t0 = kg_now_ns();
	int rc = kg_session_start(&r->rs, &so, &r->ra, &e);
	t0 = kg_prof_add(KG_PROF_REF_UP, t0);
	r->rs_up = 1;
	if (rc == -EPERM) {
		/* a layer the policy requires that this host refuses: the sandbox's finding, named as such
		 * (with a cached build, the reference's runner is the first sandbox to come up) */
		kg_verdict_add_reason(r->v, KG_R_SANDBOX_SETUP, "%s", e.msg);
		r->cand_dead = 1;
		return;
	}
	if (rc) {
		char what[700];
		kg_run_ref_failure(r, rc, &e, what, sizeof(what));
		kg_run_internal(r, "starting the reference (before any shape): %s", what);
		return;
	}
	so.be = p->be;
	so.so_path = r->cand_so;
	if (p->be->runner_script) {
		/* a ModelNew module: its source as kgate read it (build.c), and the run's state file (the
		 * constructor's arguments as data, the Model's entries, its kept buffers): never the
		 * problem module, whose Model a ModelNew could otherwise find and run */
		so.cand_module = r->cand_module;
		so.state_file = r->state_path[0] ? r->state_path : NULL;
	} else {
		so.state_file = NULL;
	}
	so.threads = p->pol.threads;
	so.watched = 1; /* a black box from LOAD on */
	rc = kg_session_start(&r->cs, &so, &r->ca, &e);
	kg_prof_add(KG_PROF_CAND_UP, t0);
	r->cs_up = 1;
	/* both sides' inputs drawn and checked by kgate-device's kernels where it has them (a build
	 * with nvcc); KGATE_HOST_INPUTS=1 draws them on the host, to compare the two */
	const uint32_t both = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP;
	const char *host_inputs = getenv("KGATE_HOST_INPUTS");
	r->dev_gen = !rc && r->rs.keeper && r->cs.keeper && (r->keeper.caps & both) == both &&
		     !(host_inputs && *host_inputs == '1');
	/* and the outputs judged there (the reference's never leave the device then), unless
	 * KGATE_HOST_CHECKS=1 */
	const char *host_checks = getenv("KGATE_HOST_CHECKS");
	r->dev_check = r->dev_gen && (r->keeper.caps & KG_DEV_CAP_CHECK) && p->task.n_outputs <= KG_DEV_MAX_CHECKS &&
		       !(host_checks && *host_checks == '1');
	r->cand_keep = r->dev_check && p->task.n_outputs == 1;
	r->cs.call_timeout_s = 30; /* copies and settling; RUN has its own deadline */
	char layers[256];
	kg_sb_layers_str(kg_sb_layers_active(r->cs.sb ? r->cs.sb : r->rs.sb), layers, sizeof(layers));
	snprintf(r->v->layers_active, sizeof(r->v->layers_active), "%s", layers);
	if (rc == KG_SESSION_ENDED || rc == KG_SESSION_FAULT) {
		kg_run_cand_ended(r, "while loading", KG_CLASS_NORMAL, 0, 0);
	} else if (rc == KG_SESSION_FAILED) {
		kg_verdict_add_reason(r->v, KG_R_LOAD_ERROR, "the candidate could not be loaded: %s", r->cs.msg);
		r->cand_dead = 1;
	} else if (rc) {
		if (rc == -EPERM)
			kg_verdict_add_reason(r->v, KG_R_SANDBOX_SETUP, "%s", e.msg);
		else
			kg_run_internal(r, "starting the candidate: %s", e.msg);
		r->cand_dead = 1;
	}
}

int kg_run_layout(struct kg_run *r, int s, struct kg_arena *a, kg_error *e)
{
	const struct kg_task *t = &r->plan->task;
	kg_dtype dt[2 * KG_RUN_MAX_T];
	int nd[2 * KG_RUN_MAX_T];
	int64_t shp[2 * KG_RUN_MAX_T][KG_MAX_DIMS];
	r->shape = s;
	r->ref_staged_draw = 0; /* staged at another layout */
	r->shortcuts.have = 0;
	for (int i = 0; i < t->n_inputs + t->n_outputs; i++) {
		const struct kg_tensor_spec *sp = i < t->n_inputs ? &t->inputs[i] : &t->outputs[i - t->n_inputs];
		memset(shp[i], 0, sizeof(shp[i]));
		int rc = kg_task_shape(sp, &r->plan->shapes[s], shp[i], e);
		if (rc)
			return rc;
		dt[i] = sp->dtype;
		nd[i] = sp->ndim;
	}
	snprintf(a->dims, sizeof(a->dims), "%s", r->plan->shape_str[s]); /* a torch reference builds per shape */
	return kg_arena_layout(a, a->paged ? s : 0, t->n_inputs, t->n_outputs, dt, nd,
			       (const int64_t(*)[KG_MAX_DIMS])shp, e);
}

void kg_run_drop_shape(struct kg_run *r, int s, const char *why)
{
	struct kg_module_report *m = &r->v->module;
	if (s <= 0 || s >= r->plan->n_shapes || s >= KG_PLAN_MAX_SHAPES || r->dropped[s])
		return;
	r->dropped[s] = 1;
	if (m->n_dropped < (int)(sizeof(m->dropped) / sizeof(m->dropped[0]))) {
		struct kg_module_drop *d = &m->dropped[m->n_dropped++];
		snprintf(d->shape, sizeof(d->shape), "%s", r->plan->shape_str[s]);
		snprintf(d->why, sizeof(d->why), "%s", why);
	}
}

int kg_run_set_shape(struct kg_run *r, int s, const char *during)
{
	kg_error e = {0};
	int rc;
	if (kg_run_layout(r, s, &r->ra, &e) || kg_run_layout(r, s, &r->ca, &e)) {
		kg_run_internal(r, "setting up shape %s: %s", kg_run_shape_str(r), e.msg);
		return -1;
	}
	if ((rc = kg_session_setup(&r->rs, &e))) {
		if (rc == KG_SESSION_FAILED && s > 0 && r->plan->ref_be->runner_script) {
			/* the Model refuses this variant (its constructor raised): dropped, no verdict */
			char why[700];
			kg_run_ref_failure(r, rc, &e, why, sizeof(why));
			kg_run_drop_shape(r, s, why);
		} else {
			kg_run_internal(r, "setting up shape %s: %s", kg_run_shape_str(r), e.msg[0] ? e.msg : r->rs.msg);
		}
		return -1;
	}
	/* whatever goes wrong on the candidate's side is the candidate's */
	if ((rc = kg_session_setup(&r->cs, &e)))
		kg_run_cand_failed(r, rc, &e, during, "SETUP", KG_CLASS_NORMAL, 0, 0);
	return rc ? -1 : 0;
}

