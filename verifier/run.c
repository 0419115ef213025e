/* A run's lifetime: its buffers and both arenas (a paged one for host runners, laid out for every
 * shape before they start; a flat one a device runner's keeper mirrors), the two runner sessions
 * and kgate-device where a side runs on a device, the layout of one shape, and the teardown. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/dtype.h"
#include "verifier/plan/prng.h"
#include "verifier/plan/resolve.h"
#include "verifier/steps.h"
#include "verifier/run.h"
#include "verifier/judge/clock.h"

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
	/* every shape's tensor table (what SETUP names) and, paged, its tensor pages (the runner's page
	 * map): both given to the runners at start, so nothing is mapped, and no tensor list is sent,
	 * after they start */
	struct kg_arena *both[2] = {&r->ra, &r->ca};
	for (int k = 0; k < 2 && !rc; k++) {
		for (int sh = 0; sh < p->n_shapes && !rc; sh++)
			if (!(rc = kg_run_layout(r, sh, both[k], e)) && !(rc = kg_arena_table_add(both[k], e)))
				rc = kg_arena_map_region(both[k], e);
		if (!rc)
			rc = kg_arena_map_seal(both[k], e);
		if (!rc)
			rc = kg_arena_tables_seal(both[k], e);
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

/* The least flush time a calibration before LOAD measured, or the keeper's at its start: the
 * quiet device's (timing.c's probe of it). */
static void quiet_from(struct kg_run *r, const struct kg_session *s)
{
	if (s->cal_flush_ns && (!r->quiet_flush_ns || s->cal_flush_ns < r->quiet_flush_ns))
		r->quiet_flush_ns = s->cal_flush_ns;
}

#define SEED_WARM 0x7761726d000ull

/* Whether kgate-device draws the inputs and judges the outputs (dev_gen, dev_check): its kernels
 * there, a layout one START stages (kg_session_dev_stages: at most KG_DEV_MAX_RANGES tensors, else
 * the inputs are written into the host arena, drawn on the host), unless KGATE_HOST_INPUTS=1 or
 * KGATE_HOST_CHECKS=1 (to compare the two). on: both sessions that will be called have a keeper. */
static void dev_sides(struct kg_run *r, int on)
{
	const struct kg_plan *p = r->plan;
	const uint32_t both = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP;
	const char *host_inputs = getenv("KGATE_HOST_INPUTS"), *host_checks = getenv("KGATE_HOST_CHECKS");
	r->dev_gen = on && (r->keeper.caps & both) == both && p->task.n_inputs + p->task.n_outputs <= KG_DEV_MAX_RANGES &&
		     !(host_inputs && *host_inputs == '1');
	r->dev_check = r->dev_gen && (r->keeper.caps & KG_DEV_CAP_CHECK) && p->task.n_outputs <= KG_DEV_MAX_CHECKS &&
		       !(host_checks && *host_checks == '1');
}

int kg_run_warm_shape(struct kg_run *r, int s, kg_error *e)
{
	/* both arenas: the draw is made at the candidate arena's layout, which kg_run_alloc left at
	 * the last shape (the reference's alone laid out, every shape but the last asked kgate-device
	 * to draw the last shape's tensors into its own slots: "bad START ranges", exit 3) */
	int rc = kg_run_layout_both(r, s, e);
	if (rc)
		return rc;
	kg_run_gen_inputs(r, KG_CLASS_NORMAL, kg_seed_derive(r->plan->master_seed, SEED_WARM + (uint64_t)s));
	return 0;
}

/* One call of the reference at every shape (and of its kg_error_terms where the task asks for
 * them), on inputs drawn for it alone and thrown away, before the candidate's session exists. */
static int ref_warm_up(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	/* drawn on the device where the run will draw them there (no gigabyte drawn on the host), its
	 * outputs looked at there (STATS: written in full) */
	dev_sides(r, 1);
	int terms = 0;
	for (int j = 0; j < p->task.n_outputs; j++)
		terms |= p->task.outputs[j].terms == KG_TERMS_REFERENCE;
	uint64_t t0 = kg_now_ns();
	for (int s = 0; s < p->n_shapes; s++) {
		kg_error e = {0};
		uint64_t ns;
		struct kg_call_result res;
		if (kg_run_warm_shape(r, s, &e) || kg_session_setup(&r->rs, &e)) {
			kg_run_internal(r, "setting up shape %s for the reference's first call: %s", kg_run_shape_str(r),
					e.msg[0] ? e.msg : r->rs.msg);
			return -1;
		}
		if (kg_run_reference(r, 0, &ns))
			return -1;
		r->ref_src = r->shadow;
		if (terms && kg_run_ref_call(r, 0, KG_ENTRY_TERMS, "'s kg_error_terms (its first call)", r->terms, &res))
			return -1;
	}
	kg_prof_add(KG_PROF_REF_UP, t0);
	r->shape = -1;
	r->ref_staged_draw = 0;
	r->ref_dev_grown = 0;
	return 0;
}

int kg_run_dev_memory(struct kg_run *r, uint64_t mem_free, const char *when, enum kg_input_class cls, uint64_t seed,
		      int trial)
{
	const struct kg_session *s = &r->cs;
	if (!s->dev_free0 || !mem_free)
		return 0;
	int64_t held = (int64_t)s->dev_free0 - (int64_t)mem_free - r->ref_dev_grown;
	uint64_t bound = r->plan->pol.gpu_memory_bytes;
	if (held <= 0 || (uint64_t)held <= bound)
		return 0;
	struct kg_reason *x = kg_verdict_add_reason(
		r->v, KG_R_SANDBOX_MEMORY,
		"candidate %s: its process holds %.0f MiB of device memory beyond what it had before it was loaded "
		"(kgate-device's count of the device's free memory, less what the reference took), over the policy's "
		"gpu.memory_mb of %.0f MiB",
		when, (double)held / 1048576.0, (double)bound / 1048576.0);
	if (trial) {
		snprintf(x->input_class, sizeof(x->input_class), "%s", kg_class_name(cls));
		x->seed = seed;
		x->has_seed = 1;
	}
	kg_session_kill_held(&r->cs); /* what it holds goes with its context */
	r->cand_dead = 1;
	return 1;
}

int kg_run_ref_starved(struct kg_run *r)
{
	uint64_t mem_free = 0;
	kg_error e = {0};
	if (!r->cs_up || r->cand_dead || !r->cs.dev_free0 || kg_keeper_meminfo(&r->keeper, &mem_free, &e))
		return 0;
	return kg_run_dev_memory(r, mem_free, "while the reference ran (its call failed with the device's memory held)",
				 KG_CLASS_NORMAL, 0, 0);
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
		 * and judges there (KGATE_NO_BATCH=1: one call a measurement, to compare), gated: a batch
		 * whose calls cannot do each other's work; ungated, none (kg_run_batch_gated) */
		const uint32_t all = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP | KG_DEV_CAP_CHECK | KG_DEV_CAP_GATE;
		const char *nb = getenv("KGATE_NO_BATCH"), *ng = getenv("KGATE_NO_GATE");
		if (p->ref_be->needs_gpu && p->be->needs_gpu && p->iterations > 0 && (r->keeper.caps & all) == all &&
		    !(nb && *nb == '1') && !(ng && *ng == '1')) {
			size_t cap = r->ra.capacity > r->ca.capacity ? r->ra.capacity : r->ca.capacity;
			r->batch_stride = ((uint64_t)cap + 4095) / 4096 * 4096;
			r->batch_room = kg_timing_batch_room(r->keeper.mem_bytes, r->batch_stride);
			if (r->batch_room > KG_DEV_MAX_GATED_SETS)
				r->batch_room = KG_DEV_MAX_GATED_SETS;
			so.dev_sets = r->batch_room;
			so.dev_stride = r->batch_stride;
		}
		r->quiet_flush_ns = r->keeper.quiet_flush_ns;
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
	quiet_from(r, &r->rs);
	/* whatever the reference allocates on its first call at a shape (a library's handle, scratch
	 * sized to the shape), it has before the candidate is loaded: nothing the candidate then
	 * holds can starve it */
	if (p->ref_be->needs_gpu && r->rs.keeper && ref_warm_up(r))
		return;
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
	/* a JIT module on a GPU: its kernels compiled ahead, into the run's cache, read-only to it */
	char jit[PATH_MAX + 32];
	if (p->be->runner_script && p->be->needs_gpu && kg_torch_needs_warmup(p->cand_src.data, p->cand_src.len)) {
		if (kg_run_warmup(r, &so, jit, sizeof(jit)))
			return;
		so.jit_dir = jit;
	}
	rc = kg_session_start(&r->cs, &so, &r->ca, &e);
	kg_prof_add(KG_PROF_CAND_UP, t0);
	r->cs_up = 1;
	/* both sides' inputs drawn and checked by kgate-device's kernels where it has them (a build
	 * with nvcc), and the outputs judged there (the reference's never leave the device then) */
	dev_sides(r, !rc && r->rs.keeper && r->cs.keeper);
	r->cand_keep = r->dev_check && p->task.n_outputs == 1;
	r->cs.call_timeout_s = 30; /* copies and settling; RUN has its own deadline */
	if (!rc)
		quiet_from(r, &r->cs);
	/* a batch is timed only where both sides' calls are gated: ungated, one call could do every
	 * set's work in its first launch, with its inputs all on its arena */
	if (!rc && (!r->rs.gated || !r->cs.gated))
		r->batch_room = 0;
	if (!rc && r->rs.keeper && r->cs.keeper && r->rs.gated != r->cs.gated) {
		/* both sides are timed alike or not at all: the same runner, the same driver, before LOAD */
		kg_run_internal(r, "the calls of the reference's runner are gated and the candidate's are not, or the other "
				   "way round (%s; %s): the two would be timed by different clocks",
				r->rs.gated ? "the reference's: gated" : r->rs.gate_off,
				r->cs.gated ? "the candidate's: gated" : r->cs.gate_off);
		r->cand_dead = 1;
		return;
	}
	if (!rc && r->cs.dev_free0 && r->cs.dev_free_load &&
	    kg_run_dev_memory(r, r->cs.dev_free_load, "once loaded (its constructors)", KG_CLASS_NORMAL, 0, 0))
		return;
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
	int n = t->n_inputs + t->n_outputs;
	/* on the heap: a whole model's tensors (KG_MAX_TENSORS each way) are 150 KiB of shapes */
	struct layout_in {
		kg_dtype dt[2 * KG_RUN_MAX_T];
		int nd[2 * KG_RUN_MAX_T];
		int64_t shp[2 * KG_RUN_MAX_T][KG_MAX_DIMS];
	} *l = calloc(1, sizeof(*l));
	if (!l)
		return kg_err(e, -ENOMEM, "out of memory laying out %d tensors", n);
	r->shape = s;
	r->ref_staged_draw = 0; /* staged at another layout */
	r->shortcuts.have = 0;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		const struct kg_tensor_spec *sp = i < t->n_inputs ? &t->inputs[i] : &t->outputs[i - t->n_inputs];
		rc = kg_task_shape(sp, &r->plan->shapes[s], l->shp[i], e);
		l->dt[i] = sp->dtype;
		l->nd[i] = sp->ndim;
	}
	/* a torch reference builds per shape, and passes a module's constants to its forward */
	size_t dl = (size_t)snprintf(a->dims, sizeof(a->dims), "%s", r->plan->shape_str[s]);
	for (int k = 0; k < t->n_consts && dl < sizeof(a->dims); k++)
		dl += (size_t)snprintf(a->dims + dl, sizeof(a->dims) - dl, " @%d=%c:%s", t->consts[k].at, t->consts[k].type,
				       t->consts[k].value);
	if (!rc)
		rc = kg_arena_layout(a, a->paged ? s : 0, s, t->n_inputs, t->n_outputs, l->dt, l->nd,
				     (const int64_t(*)[KG_MAX_DIMS])l->shp, e);
	free(l);
	return rc;
}

int kg_run_layout_both(struct kg_run *r, int s, kg_error *e)
{
	int rc = kg_run_layout(r, s, &r->ra, e);
	return rc ? rc : kg_run_layout(r, s, &r->ca, e);
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
	if (kg_run_layout_both(r, s, &e)) {
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

