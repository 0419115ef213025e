/* The start phase: kgate-device where a side runs on a device, the reference's runner (its first
 * call at every shape made before the candidate exists, so that nothing the candidate later holds
 * can starve it), a JIT candidate's warm-up, then the candidate's runner; and whether kgate-device
 * draws the inputs and judges the outputs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/phases/phases.h"
#include "verifier/phases/trial.h"
#include "verifier/phases/warmup.h"
#include "verifier/judge/clock.h"
#include "verifier/plan/prng.h"
#include "verifier/plan/resolve.h"
#include "verifier/run.h"
#include "verifier/steps.h"

/* the warm-up draws' ids (public, as every trial id: the data comes from the run's secret key) */
#define SEED_WARM 0x7761726d000ull

/* The least flush time a calibration before LOAD measured, or the keeper's at its start: the
 * quiet device's (kg_trial_ref_quiet's probe of it). */
static void quiet_from(struct kg_run *r, const struct kg_session *s)
{
	if (s->cal_flush_ns && (!r->quiet_flush_ns || s->cal_flush_ns < r->quiet_flush_ns))
		r->quiet_flush_ns = s->cal_flush_ns;
}

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

int kg_start_warm_shape(struct kg_run *r, int s, kg_error *e)
{
	/* both arenas: the draw is made at the candidate arena's layout, which kg_run_alloc left at
	 * the last shape (the reference's alone laid out, every shape but the last asked kgate-device
	 * to draw the last shape's tensors into its own slots: "bad START ranges", exit 3) */
	int rc = kg_run_layout_both(r, s, e);
	if (rc)
		return rc;
	kg_trial_gen_inputs(r, KG_CLASS_NORMAL, kg_seed_derive(r->plan->master_seed, SEED_WARM + (uint64_t)s));
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
		if (kg_start_warm_shape(r, s, &e) || kg_session_setup(&r->rs, &e)) {
			kg_run_internal(r, "setting up shape %s for the reference's first call: %s", kg_run_shape_str(r),
					e.msg[0] ? e.msg : r->rs.msg);
			return -1;
		}
		if (kg_trial_reference(r, 0, &ns))
			return -1;
		r->ref_src = r->shadow;
		if (terms && kg_trial_ref_call(r, 0, KG_ENTRY_TERMS, "'s kg_error_terms (its first call)", r->terms, &res))
			return -1;
	}
	kg_steps_add(KG_STEP_REF_UP, t0);
	r->shape = -1;
	r->ref_staged_draw = 0;
	r->ref_dev_grown = 0;
	return 0;
}

void kg_phase_start(struct kg_run *r)
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
		kg_steps_add(KG_STEP_KEEPER_UP, t0);
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
	t0 = kg_steps_add(KG_STEP_REF_UP, t0);
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
	if (p->be->runner_script && p->be->needs_gpu && kg_warmup_needed(p->cand_src.data, p->cand_src.len)) {
		if (kg_warmup_run(r, &so, jit, sizeof(jit)))
			return;
		so.jit_dir = jit;
	}
	rc = kg_session_start(&r->cs, &so, &r->ca, &e);
	kg_steps_add(KG_STEP_CAND_UP, t0);
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
