/* Trials: inputs from a secret seed (trial_device.c), one call of the trusted reference
 * (trial_ref.c) and one of the candidate (here) in their separate sandboxed runners, and the pure
 * checks (judge/) over what the call left; run.c turns their findings into reasons. The correctness
 * phase is a loop of trials over every shape and class. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/judge.h"
#include "verifier/judge/compare.h"
#include "verifier/plan/dtype.h"
#include "verifier/judge/ends.h"
#include "verifier/plan/inputs.h"
#include "verifier/plan/parallel.h"
#include "verifier/plan/prng.h"
#include "verifier/steps.h"
#include "verifier/phases/phases.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"

/* Trial ids (public: each names a trial, whose data comes from the run's secret key); the
 * reference's poison ids are trial_ref.c's. The report gives the key and each trial's id. */
#define SEED_PROBE 0x70726f6265ull


static void load_inputs(struct kg_run *r, struct kg_arena *a)
{
	kg_trial_load_inputs_from(r, a, r->shadow);
}

void kg_trial_cand_arena(struct kg_run *r, uint64_t seed)
{
	/* the inputs come with the call (cand_expose), once its clock runs; canaries and poison now,
	 * under their own keys (plan.c): a canary or poison word tells nothing of the inputs */
	uint64_t t0 = kg_now_ns();
	kg_arena_canary_fill(&r->ca, seed);
	if (kg_session_dev_stages(&r->cs))
		kg_arena_poison_pick(&r->ca, seed); /* the keeper writes it on the device */
	else
		kg_arena_poison(&r->ca, seed);
	kg_steps_add(KG_STEP_CAND_PREP, t0);
}

static void cand_expose(void *arg)
{
	struct kg_run *r = arg;
	load_inputs(r, &r->ca);
}

/* Mid-call, the candidate's process stopped: are the guard bands as they were written? */
static void cand_probe(void *arg)
{
	struct kg_run *r = arg;
	int slot, side;
	uint64_t dist;
	if (!r->probe_found.hit && kg_arena_canary_check(&r->ca, &slot, &side, &dist)) {
		r->probe_found.hit = 1;
		r->probe_found.slot = slot;
		r->probe_found.side = side;
		r->probe_found.distance = dist;
	}
}

/* A band found in use mid-call, though it may be restored by the call's return. */
static void probe_finding(struct kg_run *r, struct kg_findings *f)
{
	if (!r->probe_found.hit || f->n >= KG_MAX_FINDINGS)
		return;
	struct kg_finding *x = &f->f[f->n++];
	memset(x, 0, sizeof(*x));
	x->code = KG_R_CHECK_CANARY;
	x->slot = r->probe_found.slot;
	x->index = (int64_t)r->probe_found.distance;
	snprintf(x->msg, sizeof(x->msg),
		 "while kg_forward ran (its process stopped mid-call) the guard band %llu bytes %s '%s' held other "
		 "bytes than kgate wrote: the band is used as scratch, whatever it holds when the call returns",
		 (unsigned long long)r->probe_found.distance, r->probe_found.side < 0 ? "in front of" : "after",
		 r->names[r->probe_found.slot]);
	r->probe_found.hit = 0;
}

/* The device's mid-call probe (a gated call's capture of the inputs and bands at a keyed moment
 * after the release, on the device's clock) found bytes other than staged: an input or a band in
 * use as scratch mid-call, whatever it held when the call returned. */
static void dev_probe_finding(struct kg_run *r, const struct kg_cand_call *c, struct kg_findings *f)
{
	if (c->r.dev_probe_state != KG_DEV_IN_DIFFERS || f->n >= KG_MAX_FINDINGS)
		return;
	int slot = -1, side = 0;
	uint64_t pos = 0;
	int at = kg_arena_where(&r->ca, c->r.dev_probe_diff, &slot, &side, &pos);
	struct kg_finding *x = &f->f[f->n++];
	memset(x, 0, sizeof(*x));
	x->slot = slot;
	if (at == KG_ARENA_AT_TENSOR && slot >= 0 && slot < r->ca.n_in) {
		x->code = KG_R_CHECK_INPUT_MODIFIED;
		x->index = (int64_t)(pos / kg_dtype_size(r->ca.slot[slot].dtype));
		snprintf(x->msg, sizeof(x->msg),
			 "while kg_forward ran (kgate-device's capture of its arena at a secret moment after the inputs "
			 "were released) input '%s' held other bytes than staged, from byte %llu: the input is used as "
			 "scratch, whatever it holds when the call returns",
			 r->names[slot], (unsigned long long)pos);
	} else {
		x->code = KG_R_CHECK_CANARY;
		x->index = (int64_t)pos;
		snprintf(x->msg, sizeof(x->msg),
			 "while kg_forward ran (kgate-device's capture of its arena at a secret moment after the inputs "
			 "were released) the guard band %llu bytes %s '%s' held other bytes than kgate wrote: the band is "
			 "used as scratch, whatever it holds when the call returns",
			 (unsigned long long)pos, side < 0 ? "in front of" : "after", slot >= 0 ? r->names[slot] : "?");
	}
}

/* The inputs at the same offsets and sizes in both arenas (kg_run_layout lays both out alike). */
static int same_input_layout(const struct kg_arena *a, const struct kg_arena *b)
{
	if (a->n_in != b->n_in)
		return 0;
	for (int i = 0; i < a->n_in; i++)
		if (a->slot[i].off != b->slot[i].off || a->slot[i].bytes != b->slot[i].bytes)
			return 0;
	return 1;
}

void kg_trial_candidate(struct kg_run *r, int flush, enum kg_input_class cls, uint64_t seed, struct kg_cand_call *c)
{
	kg_error e = {0};
	memset(c, 0, sizeof(*c));
	kg_trial_cand_arena(r, seed);
	/* Generous against the reference, short enough that a hung kernel costs seconds, not the
	 * whole wall budget. */
	double deadline = 2.0 + 50.0 * (double)r->ref_ns_last / 1e9;
	struct kg_call call = {.flush = flush, .run_timeout_s = fmin(deadline, r->plan->pol.wall_s),
			       .expose = cand_expose, .expose_arg = r, .probe_ns = r->probe_ns, .probe = cand_probe,
			       .probe_arg = r};
	r->probe_ns = 0; /* one call */
	r->probe_found.hit = 0;
	if (r->cs.keeper && r->rs.keeper && r->shadow_gen.id && r->ref_staged_draw == r->shadow_gen.id &&
	    same_input_layout(&r->ra, &r->ca)) {
		/* the reference's last call staged these very inputs: copied on the device */
		call.inputs_from = 1 + r->rs.dev_slot;
		call.expose = NULL;
	} else if (r->cs.keeper && (call.draw = kg_trial_device_draw(r, r->shadow))) {
		call.expose = NULL; /* drawn there */
	}
	call.keep = r->cand_keep;
	if (r->batch_sets > 1) { /* timing_batch.c's: judged on the device alone */
		call.sets = r->batch_sets;
		call.stride = r->batch_stride;
		call.keep = 1;
	}
	r->out_hash_ok = 0;
	int rc = kg_session_run_call(&r->cs, &call, &c->r, &e);
	r->candout_host = !call.keep;
	if (!rc && kg_run_dev_memory(r, c->r.mem_free_end, "after kg_forward returned", cls, seed, 1))
		return;
	if (!rc && (c->r.gate == KG_DEV_GATE_NO_ARM || c->r.gate == KG_DEV_GATE_NO_DONE)) {
		/* its runner answered RUN, and the device never saw the call's stream mark what an
		 * honest runner marks before it answers: the reply was not the call's end */
		if (kg_run_already_reported(r, KG_R_SANDBOX_PROTOCOL, cls))
			;
		else if (c->r.gate == KG_DEV_GATE_NO_ARM)
			kg_run_trial_reason(r, KG_R_SANDBOX_PROTOCOL, cls, seed,
				     "candidate's runner answered RUN without arming the call: kgate-device never saw its "
				     "ARMED mark within %u ms, and no input reached its arena before the reply",
				     KG_DEV_GATE_GRACE_MS);
		else
			kg_run_trial_reason(r, KG_R_SANDBOX_PROTOCOL, cls, seed,
				     "candidate's runner answered RUN, and kgate-device never saw call %u of %u marked done on "
				     "its stream within %u ms: the reply was not the call's end (its outputs were taken as "
				     "they were)",
				     c->r.gate_set, c->r.sets, KG_DEV_GATE_GRACE_MS);
		/* nothing it delivered is judged as a call's outputs (c->ok stays 0), and a runner that
		 * answers for its calls is not called again: every call would wait out the grace */
		kg_session_kill_held(&r->cs);
		r->cand_dead = 1;
		return;
	}
	if (rc == KG_SESSION_FAILED && r->plan->be->needs_gpu && c->r.step && !strcmp(c->r.step, "run")) {
		/* the runner survived but the device did not: a faulting kernel (the runner's words) */
		kg_run_trial_reason(r, KG_R_SANDBOX_CRASH, cls, seed, "candidate kernel failed: \"%s\" (its runner's claim)",
			     r->cs.msg);
		r->cand_dead = 1;
	} else if (rc) {
		kg_run_cand_failed(r, rc, &e, "during kg_forward", c->r.step ? c->r.step : "RUN", cls, seed, 1);
	} else if (c->r.ret) {
		if (!kg_run_already_reported(r, KG_R_CHECK_RETURN_CODE, cls))
			kg_run_trial_reason(r, KG_R_CHECK_RETURN_CODE, cls, seed, "kg_forward returned %d", c->r.ret);
	} else {
		c->ok = 1;
	}
}

void kg_trial_view(struct kg_run *r, struct kg_view *v)
{
	*v = (struct kg_view){
		.arena = &r->ca,
		.names = r->names,
		.shadow = (const void *const *)r->shadow,
		.ref = (const void *const *)r->refout,
		.tol = r->tol,
		.cmp = r->cmp,
	};
}

/* Re-reads the outputs after a delay (and, on a device, a device-wide sync): what changed was
 * written after kg_forward returned. The outputs as they were at the return are put back, so the
 * other checks judge what the call itself delivered. Where kgate-device compares on the device,
 * it first looks whether anything at all changed since END (nothing is copied then, the usual
 * case); only a change is re-read and located on the host. */
static int async_check(struct kg_run *r, enum kg_input_class cls, uint64_t seed)
{
	const struct kg_arena *a = &r->ca;
	kg_error e = {0};
	uint64_t t0 = kg_now_ns(), diff_off = 0;
	uint32_t delay = (uint32_t)r->plan->pol.async_delay_ms;
	int looked = -1, rc = 0;
	if (r->cs.keeper && (r->keeper.caps & KG_DEV_CAP_CMP)) {
		looked = kg_session_look(&r->cs, delay, &diff_off, &e);
		if (looked == 0) {
			kg_steps_add(KG_STEP_SETTLE, t0);
			return 0; /* as END left it: inputs, bands and outputs */
		}
		if (looked != 1)
			rc = looked;
		delay = 0; /* it waited already; what follows locates the change */
		if (!rc && kg_trial_candout_host(r)) /* the outputs as END saw them, to compare against */
			return 1;
	}
	for (int j = 0; j < a->n_out && !rc; j++)
		kg_parallel_copy(r->snap[j], kg_arena_ptr(a, a->n_in + j), a->slot[a->n_in + j].bytes);
	if (!rc)
		rc = kg_session_call(&r->cs, KG_OP_SETTLE, delay, NULL, NULL, &e);
	if (rc == KG_SESSION_FAILED && r->plan->be->needs_gpu) {
		kg_run_trial_reason(r, KG_R_CHECK_ASYNC_ESCAPE, cls, seed,
			     "the device failed while settling: \"%s\" (its runner's claim)", r->cs.msg);
		r->cand_dead = 1;
		return 1;
	}
	if (rc) {
		kg_run_cand_failed(r, rc, &e, "after kg_forward returned", "SETTLE", cls, seed, 1);
		return 1;
	}
	struct kg_view v;
	struct kg_findings f = {0};
	kg_trial_view(r, &v);
	uint32_t shown = (uint32_t)r->plan->pol.async_delay_ms;
	int escaped = kg_check_unchanged(&v, (const void *const *)r->snap, shown, &f);
	int slot, side;
	uint64_t pos;
	if (looked == 1 && !escaped && kg_arena_where(a, diff_off, &slot, &side, &pos) == KG_ARENA_AT_TENSOR &&
	    slot >= a->n_in) {
		/* an output the device saw changed since END, put back before it was read again: the
		 * change is the finding, wherever it went */
		struct kg_finding *x = &f.f[f.n < KG_MAX_FINDINGS ? f.n++ : KG_MAX_FINDINGS - 1];
		memset(x, 0, sizeof(*x));
		x->code = KG_R_CHECK_ASYNC_ESCAPE;
		x->slot = slot;
		x->index = (int64_t)(pos / kg_dtype_size(a->slot[slot].dtype));
		snprintf(x->msg, sizeof(x->msg),
			 "output '%s' changed within %u ms after kg_forward returned (kgate-device saw it against its "
			 "snapshot), and was put back: work escaped the call",
			 r->names[slot], shown);
		escaped = 1;
	}
	kg_run_record(r, &f, cls, seed, NULL);
	for (int j = 0; j < a->n_out; j++)
		kg_parallel_copy(kg_arena_ptr(a, a->n_in + j), r->snap[j], a->slot[a->n_in + j].bytes);
	kg_steps_add(KG_STEP_SETTLE, t0);
	return escaped;
}

/* Folds this trial's comparisons into the verdict's accuracy summary. */
static void note_accuracy(struct kg_run *r, enum kg_input_class cls)
{
	struct kg_accuracy *acc = &r->v->acc;
	const struct kg_arena *a = &r->ca;
	for (int j = 0; j < a->n_out; j++) {
		const struct kg_cmp *c = &r->cmp[j];
		int first = acc->n++ == 0;
		acc->max_abs_err = fmax(acc->max_abs_err, c->max_abs_err);
		acc->max_rel_err = fmax(acc->max_rel_err, c->max_rel_err);
		acc->normwise_err = fmax(acc->normwise_err, c->normwise_err);
		acc->factor_max = fmax(acc->factor_max, c->factor_max);
		if (first || c->effective_bits < acc->effective_bits) {
			acc->effective_bits = c->effective_bits;
			acc->normwise_res = c->normwise_res;
			snprintf(acc->bits_class, sizeof(acc->bits_class), "%s", kg_class_name(cls));
			snprintf(acc->bits_shape, sizeof(acc->bits_shape), "%s", kg_run_shape_str(r));
			snprintf(acc->bits_tensor, sizeof(acc->bits_tensor), "%s", r->names[a->n_in + j]);
		}
		if (!first && !(c->tol_used > acc->tol_used))
			continue;
		acc->tol_used = c->tol_used;
		acc->atol = r->tol[j].atol;
		acc->rtol = r->tol[j].rtol;
		acc->growth = r->tol[j].growth;
		snprintf(acc->input_class, sizeof(acc->input_class), "%s", kg_class_name(cls));
		snprintf(acc->shape, sizeof(acc->shape), "%s", kg_run_shape_str(r));
		snprintf(acc->tensor, sizeof(acc->tensor), "%s", r->names[a->n_in + j]);
	}
}

/* One correctness trial. The first of each class also asks whether the class is degenerate (a
 * property of the class and the task, not of the seed). */
struct trial_id {
	enum kg_input_class cls;
	uint64_t seed;
};

static void run_trial(struct kg_run *r, enum kg_input_class cls, uint64_t seed, int with_async, int first_of_class,
		      const struct trial_id *next)
{
	uint64_t ref_ns;
	struct kg_cand_call c;
	struct kg_view v;
	struct kg_findings f = {0};
	r->trial_no++;
	kg_run_progress(r, "trial %d/%d: class %s, %s", r->trial_no, r->trial_total, kg_class_name(cls), kg_run_shape_str(r));
	int got = kg_trial_ahead_take(r, cls, seed, &ref_ns);
	if (got < 0)
		return;
	if (got > 0) {
		kg_trial_gen_inputs(r, cls, seed);
		if (kg_trial_reference(r, 0, &ref_ns))
			return;
	}
	kg_trial_view(r, &v);
	if (first_of_class) {
		r->n_class_checks++;
		if (kg_trial_degenerate(r, &v)) {
			r->degenerate_mask |= 1u << cls;
			r->n_degenerate++;
		}
	}
	r->n_trials++;
	/* flushed like a timed call, so that no call tells the candidate which phase it is in; stopped
	 * once at a secret moment within the reference's time, to see its guard bands mid-call (the
	 * timed calls are not: a stop would lengthen their claims) */
	uint64_t pd = kg_seed_derive(seed, SEED_PROBE);
	r->probe_ns = (uint64_t)((0.05 + 0.9 * (double)(pd % 1024) / 1024.0) * (double)r->ref_ns_last) + 5000;
	kg_trial_candidate(r, 1, cls, seed, &c);
	if (r->cand_dead)
		return;
	if (with_async && c.ok && (async_check(r, cls, seed) || r->cand_dead))
		return;
	/* before the look-ahead's call, which overwrites the device's copy of the reference's outputs */
	int judged = c.ok ? kg_trial_device_judge(r) : kg_trial_host_judges(r);
	if (judged == -2)
		kg_run_cand_failed(r, KG_SESSION_ENDED, NULL, "after kg_forward returned", "CHECK", cls, seed, 1);
	if (judged < 0)
		return;
	v.outputs_judged = judged;
	if (r->dev_check && !r->out_hash_ok) {
		/* a call the device did not judge (its outputs on the host now), hashed as the device
		 * hashes the others: the shortcut check compares hashes across calls */
		for (int j = 0; j < r->ca.n_out; j++) {
			const struct kg_arena_slot *sl = &r->ca.slot[r->ca.n_in + j];
			r->out_hash[j] = kg_judge_hash(kg_arena_ptr(&r->ca, r->ca.n_in + j), (uint32_t)sl->dtype,
						       (uint64_t)sl->numel);
		}
		r->out_hash_ok = 1;
	}
	v.output_hashes = r->out_hash_ok ? r->out_hash : NULL;
	if (next)
		kg_trial_ahead_start(r, next->cls, next->seed);
	uint64_t t0 = kg_now_ns();
	probe_finding(r, &f);
	dev_probe_finding(r, &c, &f);
	kg_trial_view_inputs(r, &v);
	kg_check_canaries(&v, &f);
	kg_check_inputs(&v, &f);
	kg_check_unwritten(&v, &f);
	int mismatch = c.ok && kg_trial_check_outputs(r, &v, KG_R_CHECK_MISMATCH, &f);
	if (c.ok)
		note_accuracy(r, cls);
	kg_check_tail(c.r.tail_ns, c.r.child_ns, &f);
	if (mismatch) { /* whether an output is a copy of an input: the host's copy of both */
		kg_trial_host_inputs(r, r->shadow);
		if (kg_trial_candout_host(r))
			return;
	}
	kg_check_shortcuts(&v, mismatch, &r->shortcuts, &f);
	kg_steps_add(KG_STEP_CHECKS, t0);
	kg_run_record(r, &f, cls, seed, "after the call");
}

/* The trials planned over the shapes not dropped. */
static int shape_trials(const struct kg_run *r)
{
	int n = 0;
	for (int s = 0; s < r->plan->n_shapes; s++)
		for (int k = 0; !r->dropped[s] && k < KG_CLASS_COUNT_; k++)
			n += kg_plan_trials(r->plan, s, (enum kg_input_class)k);
	return n;
}

void kg_phase_correctness(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	uint64_t t0 = kg_now_ns(), trial_seq = 0;
	int shapes_done = 0;
	r->trial_total = shape_trials(r);
	for (int s = 0; s < p->n_shapes && !r->cand_dead && !r->v->internal_error[0]; s++) {
		if (r->dropped[s]) /* the Model refuses it (build.c): no reference, no trial */
			continue;
		if (kg_run_set_shape(r, s, "while setting up")) {
			if (r->dropped[s])
				continue;
			break;
		}
		shapes_done = s + 1;
		int first = 1;
		for (int k = 0; k < KG_CLASS_COUNT_ && !r->cand_dead && !r->v->internal_error[0] && !r->dropped[s]; k++) {
			int nt = kg_plan_trials(p, s, (enum kg_input_class)k);
			for (int t = 0; t < nt && !r->cand_dead && !r->v->internal_error[0] && !r->dropped[s]; t++) {
				uint64_t seed = kg_seed_derive(p->master_seed, ++trial_seq);
				/* the next trial of this shape, whose reference runs during this one's checks */
				struct trial_id next = {(enum kg_input_class)k, kg_seed_derive(p->master_seed, trial_seq + 1)};
				int has_next = t + 1 < nt;
				for (int k2 = k + 1; !has_next && k2 < KG_CLASS_COUNT_; k2++)
					if (kg_plan_trials(p, s, (enum kg_input_class)k2) > 0) {
						next.cls = (enum kg_input_class)k2;
						has_next = 1;
					}
				run_trial(r, (enum kg_input_class)k, seed, first, s == 0 && t == 0, has_next ? &next : NULL);
				first = 0;
			}
		}
		kg_run_ahead_drop(r); /* before the next shape's layout */
	}
	kg_run_ahead_drop(r);
	int failed = r->v->n_reasons > 0;
	/* A PASS only for every planned trial run: a trusted side that failed part way (exit 3) leaves
	 * the rest unchecked, and kgate 0.2 said "PASS correctness 26 trials over 9 shapes" when one
	 * shape of nine had run before its reference failed. */
	int complete = !r->v->internal_error[0] && r->n_trials > 0 && r->n_trials >= shape_trials(r);
	char tol[160];
	snprintf(tol, sizeof(tol), "atol=%g rtol=%g rms=%g (precision %s), growth %g*n*u up to %g", p->atol, p->rtol,
		 p->rms_tol, kg_precision_name(p->pol.precision), p->growth, p->growth_cap);
	int n_dropped = 0;
	for (int s = 0; s < p->n_shapes; s++)
		n_dropped += r->dropped[s];
	char shapes[96];
	snprintf(shapes, sizeof(shapes), "%d shapes", p->n_shapes - n_dropped);
	if (n_dropped)
		snprintf(shapes + strlen(shapes), sizeof(shapes) - strlen(shapes),
			 " (%d dropped: the Model refuses them, see the module lines)", n_dropped);
	if (failed || complete)
		kg_verdict_add_check(r->v, "correctness", failed ? KG_CHECK_FAIL : KG_CHECK_PASS, kg_run_secs_since(t0),
				     "%d trials over %s, %s", r->n_trials, shapes, tol);
	else
		kg_verdict_add_check(r->v, "correctness", KG_CHECK_SKIP, kg_run_secs_since(t0),
				     "%s: %d of %d trials ran, stopped at shape %d of %d by a failure of kgate's own (see "
				     "the error); %s",
				     r->n_trials ? "incomplete" : "not run", r->n_trials, r->trial_total, shapes_done,
				     p->n_shapes, tol);
	r->v->trials_run = r->n_trials;
	size_t len = 0;
	for (int k = 0; k < KG_CLASS_COUNT_; k++)
		if (r->degenerate_mask >> k & 1)
			len += (size_t)snprintf(r->v->degenerate_classes + len, sizeof(r->v->degenerate_classes) - len,
						"%s%s", len ? "," : "", kg_class_name((enum kg_input_class)k));
	if (!failed && r->n_class_checks > 0 && r->n_degenerate == r->n_class_checks)
		kg_verdict_add_reason(r->v, KG_R_CHECK_DEGENERATE,
				      "every trial's reference output is near-constant under the tolerance: the trials "
				      "cannot tell a real kernel from a constant");
	r->v->t_checks_s = kg_run_secs_since(t0);
}
