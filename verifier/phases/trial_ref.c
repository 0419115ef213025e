/* The trusted reference's side of a trial: its call in three parts (poison, the session call,
 * reading what it left) so that the middle one can run on a thread of its own, the look-ahead that
 * runs the next trial's reference call beside this trial's checks, the tolerances each call's
 * outputs give (compare.h), and the per-element allowances it computes for an output that failed
 * without them (terms). Timed like the candidate where a device keeper holds the clock. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verifier/judge/clock.h"
#include "verifier/judge/compare.h"
#include "verifier/plan/dtype.h"
#include "verifier/plan/parallel.h"
#include "verifier/steps.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"

/* The reference's poison ids (public, as trial ids are: the data comes from the run's key). */
#define SEED_REF_POISON 0x7265660000ull

/* A call of the trusted reference in three parts, so that the middle one (the session call, which
 * touches nothing but rs) can run on a thread of its own: poisoning its outputs, the call, and
 * reading what it left (each output copied to dst[j], written in full). what names the call in an
 * internal error. */
static void ref_prepare(struct kg_run *r)
{
	if (kg_session_dev_stages(&r->rs)) /* written on the device by the keeper's START */
		kg_arena_poison_pick(&r->ra, SEED_REF_POISON + r->ref_poison_seq++);
	else
		kg_arena_poison(&r->ra, SEED_REF_POISON + r->ref_poison_seq++);
}

/* The reference's inputs, written into its arena once its call's clock runs (as the candidate's):
 * the buffers ref_src names, or (NULL) none, when the caller wrote them already. */
static void ref_expose(void *arg)
{
	struct kg_run *r = arg;
	if (r->ref_src && !kg_trial_device_draw(r, r->ref_src))
		kg_trial_load_inputs_from(r, &r->ra, r->ref_src);
	/* which draw the keeper stages for this call (on the look-ahead's thread: read by the main
	 * thread only after it is joined) */
	r->ref_staged_draw = r->ref_src == r->shadow ? r->shadow_gen.id : r->ref_src == r->shadow_next ? r->shadow_next_gen.id : 0;
}

/* entry: KG_ENTRY_FORWARD, or KG_ENTRY_TERMS (the reference's kg_error_terms); keep: its outputs
 * stay on the device (dev_check), judged there */
static int ref_exec(struct kg_run *r, int flush, uint32_t entry, int keep, struct kg_call_result *res, kg_error *e)
{
	/* the trusted reference may take as long as the policy lets a run session live: a CPU
	 * reference at a nominal shape (matmul N=4096) runs past a fixed minute */
	double ref_s = r->plan->pol.wall_s > 60 ? r->plan->pol.wall_s : 60;
	/* inputs the host does not hold are drawn on the device by the keeper (dev_gen) */
	const struct kg_call_draw *d = r->ref_src && r->rs.keeper ? kg_trial_device_draw(r, r->ref_src) : NULL;
	return kg_session_run_call(&r->rs,
				   &(struct kg_call){.flush = flush, .run_timeout_s = ref_s, .entry = entry,
						     .expose = ref_expose, .expose_arg = r, .draw = d, .keep = keep},
				   res, e);
}

/* STATS of each of the reference's outputs left on the device (near: the distance of every
 * element from c0 and c1 under the trial's tolerance too); 0, or -1 after recording an internal
 * error. */
static int ref_stats_on_device(struct kg_run *r, const char *what, int near, const double *c1, struct kg_dev_cmp *out)
{
	const struct kg_plan *p = r->plan;
	const struct kg_arena *a = &r->ra;
	struct kg_dev_check chk[KG_DEV_MAX_CHECKS];
	kg_error e = {0};
	if (p->task.n_outputs > KG_DEV_MAX_CHECKS) { /* dev_check is off for such tasks (start.c) */
		kg_run_internal(r, "%d outputs for the device's checks (at most %d)", p->task.n_outputs, KG_DEV_MAX_CHECKS);
		return -1;
	}
	for (int j = 0; j < p->task.n_outputs; j++) {
		const struct kg_arena_slot *sl = &a->slot[p->task.n_inputs + j];
		chk[j] = (struct kg_dev_check){.off = sl->off, .n = (uint64_t)sl->numel, .poison = sl->poison,
					       .dtype = (uint32_t)sl->dtype, .mode = KG_DEV_CHK_STATS};
		if (near) {
			chk[j].near = 1;
			chk[j].atol = r->tol[j].atol;
			chk[j].rtol = r->tol[j].rtol;
			chk[j].c[0] = 0.0;
			chk[j].c[1] = c1[j];
		}
	}
	if (kg_keeper_check(&r->keeper, r->rs.dev_slot, -1, chk, p->task.n_outputs, out, &e)) {
		kg_run_internal(r, "judging the reference%s's outputs on the device (%s): %s", what, kg_run_shape_str(r), e.msg);
		return -1;
	}
	return 0;
}

/* What the device found of the reference's outputs left there (kept): poison, and the figures
 * the tolerances take (ref_stats); 0, or -1 after recording an internal error. */
static int ref_stats(struct kg_run *r, const char *what)
{
	const struct kg_plan *p = r->plan;
	if (ref_stats_on_device(r, what, 0, NULL, r->ref_stats))
		return -1;
	for (int j = 0; j < p->task.n_outputs; j++)
		if (r->ref_stats[j].first_poison >= 0) {
			kg_run_internal(r, "the reference%s left output '%s' partly unwritten (%s)", what,
					r->names[p->task.n_inputs + j], kg_run_shape_str(r));
			return -1;
		}
	r->refout_host = 0;
	return 0;
}

int kg_trial_degenerate(struct kg_run *r, const struct kg_view *v)
{
	if (r->refout_host)
		return kg_check_degenerate(v);
	double mean[KG_DEV_MAX_CHECKS];
	struct kg_dev_cmp out[KG_DEV_MAX_CHECKS];
	for (int j = 0; j < r->plan->task.n_outputs && j < KG_RUN_MAX_T; j++)
		mean[j] = r->ref_stats[j].n_finite ? r->ref_stats[j].sum / (double)r->ref_stats[j].n_finite : 0.0;
	if (ref_stats_on_device(r, "", 1, mean, out))
		return 0;
	/* one output a constant passes is enough; a scalar is its own mean (kg_check_degenerate) */
	for (int j = 0; j < r->plan->task.n_outputs; j++)
		if (!out[j].far[0] || (!out[j].far[1] && r->ra.slot[r->plan->task.n_inputs + j].numel > 1))
			return 1;
	return 0;
}

/* What the reference's call took from the device's free memory (its START against its END, the
 * candidate stopped between them), counted once the candidate has its baseline. */
static void ref_mem_note(struct kg_run *r, const struct kg_call_result *res)
{
	if (r->cs_up && r->cs.dev_free0 && res->mem_free_start && res->mem_free_end)
		r->ref_dev_grown += (int64_t)res->mem_free_start - (int64_t)res->mem_free_end;
}

/* A gated reference call whose marks did not all come: the trusted runner's calibration saw them
 * come, so this is kgate's to explain; 0 when they came (or the call was not gated). */
static int ref_gate_failed(struct kg_run *r, const struct kg_call_result *res, const char *what)
{
	if (res->gate != KG_DEV_GATE_NO_ARM && res->gate != KG_DEV_GATE_NO_DONE)
		return 0;
	kg_run_internal(r, "the reference%s (%s): kgate-device never saw its runner's %s mark (set %u of %u)", what,
			kg_run_shape_str(r), res->gate == KG_DEV_GATE_NO_ARM ? "ARMED" : "DONE", res->gate_set, res->sets);
	return -1;
}

static int ref_finish(struct kg_run *r, int rc, const struct kg_call_result *res, const kg_error *e,
		      const char *what, void *const *dst, int kept)
{
	const struct kg_plan *p = r->plan;
	struct kg_arena *a = &r->ra;
	if (rc || res->ret) {
		/* the device's memory taken by the candidate beyond its bound: its fault, not kgate's */
		if (kg_run_ref_starved(r))
			return -1;
	}
	if (rc) {
		char why[700];
		kg_run_ref_failure(r, rc, e, why, sizeof(why));
		if (rc == KG_SESSION_FAILED && r->shape > 0 && p->ref_be->runner_script) {
			/* a Model that refuses a shape other than the base one (its runner said its forward
			 * raised there): the shape is dropped, which says nothing of the candidate */
			kg_run_drop_shape(r, r->shape, why);
			return -1;
		}
		kg_run_internal(r, "running the reference%s (%s, %s): %s", what, kg_run_shape_str(r), res->step, why);
		return -1;
	}
	ref_mem_note(r, res);
	if (res->ret) {
		kg_run_internal(r, "the reference%s returned %d (%s)", what, res->ret, kg_run_shape_str(r));
		return -1;
	}
	if (ref_gate_failed(r, res, what))
		return -1;
	r->ref_flush_ns = res->flush_ns;
	if (kept)
		return ref_stats(r, what);
	if (dst == r->refout)
		r->refout_host = 1;
	for (int j = 0; j < p->task.n_outputs; j++) {
		int s = p->task.n_inputs + j;
		if (!dst[j])
			continue;
		if (kg_arena_unwritten(a, s, NULL) >= 0) {
			kg_run_internal(r, "the reference%s left output '%s' partly unwritten (%s)", what, r->names[s],
					kg_run_shape_str(r));
			return -1;
		}
		kg_parallel_copy(dst[j], kg_arena_ptr(a, s), a->slot[s].bytes);
	}
	return 0;
}

int kg_trial_ref_call(struct kg_run *r, int flush, uint32_t entry, const char *what, void *const *dst,
		    struct kg_call_result *res)
{
	kg_error e = {0};
	/* a call into other buffers (the terms) overwrites the device's copy of this trial's outputs */
	if (dst != r->refout && r->dev_check && kg_trial_refout_host(r))
		return -1;
	int keep = r->dev_check && entry == KG_ENTRY_FORWARD && dst == r->refout;
	uint64_t t = kg_now_ns();
	ref_prepare(r);
	t = kg_steps_add(KG_STEP_REF_PREP, t);
	int rc = ref_exec(r, flush, entry, keep, res, &e);
	t = kg_steps_add(KG_STEP_REF_CALL, t);
	rc = ref_finish(r, rc, res, &e, what, dst, keep);
	kg_steps_add(KG_STEP_REF_READ, t);
	return rc;
}

/* The reference's outputs in refout: this trial's tolerances from them (compare.h). */
static int ref_tolerances(struct kg_run *r, const struct kg_call_result *res, uint64_t *ns);

int kg_trial_reference(struct kg_run *r, int flush, uint64_t *ns)
{
	struct kg_call_result res;
	kg_run_ahead_drop(r); /* one call on rs at a time */
	r->ref_src = r->shadow;
	if (kg_trial_ref_call(r, flush, KG_ENTRY_FORWARD, "", r->refout, &res))
		return -1;
	return ref_tolerances(r, &res, ns);
}

static int ref_tolerances(struct kg_run *r, const struct kg_call_result *res, uint64_t *ns)
{
	const struct kg_plan *p = r->plan;
	struct kg_arena *a = &r->ra;
	r->ref_download_ns = res->download_ns;
	for (int j = 0; j < p->task.n_outputs; j++) {
		int s = p->task.n_inputs + j;
		/* the tolerance model (compare.h): the task's bounds, the reduction's growth, both scaled
		 * by this reference output's own magnitude */
		const struct kg_arena_slot *sl = &a->slot[s];
		/* a bool has no rounding: judged byte for byte, whatever the task's bounds */
		int exact = sl->dtype == KG_BOOL;
		const struct kg_tol_model m = {
			.atol = exact ? 0 : p->atol,
			.rtol = exact ? 0 : p->rtol,
			.rms = exact ? 0 : p->rms_tol,
			.growth = p->growth,
			.cap = p->growth_cap,
			.factor_row = p->task.outputs[j].factor_row && sl->ndim > 0 ? sl->shape[sl->ndim - 1] : 0,
			.reference_terms = p->task.outputs[j].terms == KG_TERMS_REFERENCE,
		};
		int64_t nred = 1;
		kg_error re = {0};
		if (kg_task_reduction(&p->task.outputs[j], &p->shapes[r->shape], &nred, &re)) {
			kg_run_internal(r, "output '%s': %s", r->names[s], re.msg); /* checked when the task loaded */
			return -1;
		}
		const struct kg_dev_cmp *st = &r->ref_stats[j];
		double rms = !(m.rms > 0 || kg_tol_growth(&m, a->slot[s].dtype, nred) > 0) ? 0
			     : r->refout_host ? kg_rms(r->refout[j], a->slot[s].dtype, (size_t)a->slot[s].numel)
			     : st->n_finite ? sqrt(st->sum_sq / (double)st->n_finite)
					    : 0;
		kg_tol_resolve(&m, a->slot[s].dtype, nred, rms, &r->tol[j]);
	}
	*ns = res->child_ns;
	if (r->rs.keeper) {
		/* on a device both sides are timed alike: by the keeper's span, as the candidate's
		 * bound is (judge/clock.c), never below the runner's own events */
		uint64_t idle = r->rs.cal_span_ns + res->snap_ns + (res->sets > 1 ? (res->sets - 1) * r->rs.cal_set_ns : 0);
		uint64_t bound = res->span_ns > idle ? res->span_ns - idle : 0;
		if (bound > *ns)
			*ns = bound;
	}
	r->ref_ns_last = *ns;
	uint64_t own = res->child_ns + r->rs.cal_cpu_ns;
	r->ref_excess_ns = res->cpu_known && res->cpu_ns > own ? res->cpu_ns - own : 0;
	return 0;
}

int kg_trial_ref_batch(struct kg_run *r, uint32_t sets, uint64_t stride, uint64_t *ns)
{
	const struct kg_plan *p = r->plan;
	const struct kg_arena *a = &r->ra;
	struct kg_call_result res;
	kg_error e = {0};
	kg_run_ahead_drop(r);
	r->ref_src = r->shadow;
	const struct kg_call_draw *d = r->rs.keeper ? kg_trial_device_draw(r, r->shadow) : NULL;
	if (!d || p->task.n_outputs > KG_DEV_MAX_CHECKS) {
		kg_run_internal(r, "a batched call needs its inputs drawn and its outputs judged on the device");
		return -1;
	}
	ref_prepare(r);
	double ref_s = p->pol.wall_s > 60 ? p->pol.wall_s : 60;
	struct kg_call call = {.flush = 1, .run_timeout_s = ref_s, .entry = KG_ENTRY_FORWARD, .expose = ref_expose,
			       .expose_arg = r, .draw = d, .keep = 1, .sets = sets, .stride = stride};
	uint64_t t = kg_now_ns();
	int rc = kg_session_run_call(&r->rs, &call, &res, &e);
	t = kg_steps_add(KG_STEP_REF_CALL, t);
	r->refout_host = 0; /* what the arena holds is no set's outputs */
	if ((rc || res.ret) && kg_run_ref_starved(r))
		return -1;
	if (!rc)
		ref_mem_note(r, &res);
	if (!rc && !res.ret && ref_gate_failed(r, &res, " on a batch"))
		return -1;
	r->ref_flush_ns = res.flush_ns;
	if (rc || res.ret) {
		char why[700];
		if (rc)
			kg_run_ref_failure(r, rc, &e, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "it returned %d", res.ret);
		kg_run_internal(r, "running the reference on %u sets back to back (%s): %s", sets, kg_run_shape_str(r), why);
		return -1;
	}
	/* the tolerances from every set's outputs at once: one magnitude for the batch */
	struct kg_dev_cmp sum[KG_DEV_MAX_CHECKS];
	memset(sum, 0, sizeof(sum));
	int n_out = p->task.n_outputs, total = (int)sets * n_out;
	for (int at = 0; at < total; at += KG_DEV_MAX_CHECKS) {
		struct kg_dev_check chk[KG_DEV_MAX_CHECKS];
		struct kg_dev_cmp out[KG_DEV_MAX_CHECKS];
		int n = total - at < KG_DEV_MAX_CHECKS ? total - at : KG_DEV_MAX_CHECKS;
		for (int i = 0; i < n; i++) {
			const struct kg_arena_slot *sl = &a->slot[p->task.n_inputs + (at + i) % n_out];
			chk[i] = (struct kg_dev_check){.off = sl->off + (uint64_t)((at + i) / n_out) * stride,
						       .n = (uint64_t)sl->numel,
						       .poison = sl->poison,
						       .dtype = (uint32_t)sl->dtype,
						       .mode = KG_DEV_CHK_STATS};
		}
		if (kg_keeper_check(&r->keeper, r->rs.dev_slot, -1, chk, n, out, &e)) {
			kg_run_internal(r, "judging the reference's batched outputs on the device (%s): %s", kg_run_shape_str(r),
					e.msg);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			int j = (at + i) % n_out;
			if (out[i].first_poison >= 0) {
				kg_run_internal(r, "the reference left output '%s' of set %d of a batch partly unwritten (%s)",
						r->names[p->task.n_inputs + j], (at + i) / n_out, kg_run_shape_str(r));
				return -1;
			}
			sum[j].n += out[i].n;
			sum[j].n_finite += out[i].n_finite;
			sum[j].sum += out[i].sum;
			sum[j].sum_sq += out[i].sum_sq;
		}
	}
	for (int j = 0; j < n_out; j++) {
		sum[j].first_poison = -1;
		r->ref_stats[j] = sum[j];
	}
	kg_steps_add(KG_STEP_JUDGE, t);
	return ref_tolerances(r, &res, ns);
}

static void *ahead_main(void *arg)
{
	struct kg_run *r = arg;
	uint64_t t = kg_now_ns();
	r->ahead.rc = ref_exec(r, 0, KG_ENTRY_FORWARD, r->ahead.kept, &r->ahead.res, &r->ahead.e);
	kg_steps_add(KG_STEP_REF_AHEAD, t);
	return NULL;
}

/* The next trial's inputs, and its reference call started on a thread. Called after the
 * candidate's call has returned and before its checks, which then overlap the reference. (The
 * inputs are drawn here, on every core, not on the thread: drawn beside the checks they only
 * compete with them, measured 1.73x the plain harness against 1.58x.) */
void kg_trial_ahead_start(struct kg_run *r, enum kg_input_class cls, uint64_t seed)
{
	if (!r->shadow_next[0] || r->ahead.active || r->ahead.ready)
		return;
	/* its call overwrites the device's copy of this trial's reference outputs: a check that has
	 * not had them on the device gets them on the host first */
	if (r->dev_check && !r->refout_host && !r->judged && kg_trial_refout_host(r))
		return;
	kg_trial_gen_into(r, 1, cls, seed);
	r->ref_src = r->shadow_next; /* written by the call, on the thread */
	uint64_t t = kg_now_ns();
	ref_prepare(r);
	kg_steps_add(KG_STEP_REF_PREP, t);
	r->ahead.cls = cls;
	r->ahead.seed = seed;
	r->ahead.kept = r->dev_check;
	memset(&r->ahead.e, 0, sizeof(r->ahead.e));
	r->ahead.ready = 1;
	if (pthread_create(&r->ahead.th, NULL, ahead_main, r))
		ahead_main(r); /* no thread: the same call, in line */
	else
		r->ahead.active = 1;
}

/* The reference's result for (cls, seed) when the look-ahead has it: 0 taken (refout, tolerances
 * and this trial's inputs in shadow), 1 not there (the caller generates and calls), -1 failed
 * (recorded). */
int kg_trial_ahead_take(struct kg_run *r, enum kg_input_class cls, uint64_t seed, uint64_t *ns)
{
	if (!r->ahead.ready || r->ahead.cls != cls || r->ahead.seed != seed) {
		kg_run_ahead_drop(r);
		return 1;
	}
	kg_run_ahead_drop(r); /* the call is over: its result is taken below */
	for (int i = 0; i < r->plan->task.n_inputs; i++) {
		void *t = r->shadow[i];
		r->shadow[i] = r->shadow_next[i];
		r->shadow_next[i] = t;
	}
	struct kg_run_draw g = r->shadow_gen;
	r->shadow_gen = r->shadow_next_gen;
	r->shadow_next_gen = g;
	memset(&g, 0, sizeof(g));
	uint64_t t = kg_now_ns();
	int rc = ref_finish(r, r->ahead.rc, &r->ahead.res, &r->ahead.e, "", r->refout, r->ahead.kept) ? -1
												: ref_tolerances(r, &r->ahead.res, ns);
	kg_steps_add(KG_STEP_REF_READ, t);
	return rc;
}

/* The reference arena's inputs: this call's, each element's sign cleared (floats only, task.c: the
 * sign is the top bit of each little-endian element). */
static void abs_inputs(struct kg_run *r, struct kg_arena *a)
{
	kg_trial_host_inputs(r, r->shadow);
	for (int i = 0; i < r->plan->task.n_inputs; i++) {
		const struct kg_arena_slot *sl = &a->slot[i];
		unsigned char *d = kg_arena_ptr(a, i);
		const unsigned char *src = r->shadow[i];
		size_t es = kg_dtype_size(sl->dtype);
		for (size_t k = 0; k < sl->bytes; k++)
			d[k] = (k % es == es - 1) ? (unsigned char)(src[k] & 0x7f) : src[k];
	}
}

/* The outputs that failed under the output-wide bound and whose manifest declares `terms` get
 * each element's own allowance (compare.h) from the trusted reference, which runs once more on
 * this call's inputs: `abs_inputs` runs kg_forward on their absolute values (sum|terms|, scaled
 * by the reduction's gt), `reference` runs the reference's kg_error_terms on them as they are (an
 * allowance in the output's own units). Only then: an output that passes, honest or not, costs
 * nothing more. 1 when some output's bound was widened, 0 when none, -1 after an internal error. */
static int term_bounds_by(struct kg_run *r, const struct kg_findings *f, enum kg_terms how)
{
	const struct kg_plan *p = r->plan;
	struct kg_arena *a = &r->ra;
	void *dst[KG_RUN_MAX_T] = {0};
	int need = 0;
	for (int i = 0; i < f->n; i++) {
		int j = f->f[i].slot - p->task.n_inputs;
		if (j >= 0 && j < p->task.n_outputs && p->task.outputs[j].terms == how && !r->tol[j].terms &&
		    f->f[i].code != KG_R_CHECK_NAN) {
			dst[j] = r->terms[j];
			need = 1;
		}
	}
	if (!need)
		return 0;
	kg_run_ahead_drop(r);
	int by_ref = how == KG_TERMS_REFERENCE;
	r->ref_src = by_ref ? r->shadow : NULL;
	if (!by_ref)
		abs_inputs(r, a); /* from the host's copy, drawn there if need be */
	struct kg_call_result res;
	if (kg_trial_ref_call(r, 0, by_ref ? KG_ENTRY_TERMS : KG_ENTRY_FORWARD,
		     by_ref ? "'s kg_error_terms (the task says terms: reference)" : " on |inputs|", dst, &res))
		return -1;
	const struct kg_tol_model m = {.growth = p->growth, .cap = p->growth_cap};
	for (int j = 0; j < p->task.n_outputs; j++) {
		if (!dst[j])
			continue;
		r->tol[j].terms = r->terms[j];
		r->tol[j].terms_g = 1.0;
		if (by_ref)
			continue;
		int64_t nred = 1;
		kg_error re = {0};
		kg_task_reduction(&p->task.outputs[j], &p->shapes[r->shape], &nred, &re); /* checked at load */
		r->tol[j].terms_g = kg_tol_terms_g(&m, a->slot[p->task.n_inputs + j].dtype, nred);
	}
	return 1;
}

static int term_bounds(struct kg_run *r, const struct kg_findings *f)
{
	int a = term_bounds_by(r, f, KG_TERMS_ABS_INPUTS);
	int b = a < 0 ? -1 : term_bounds_by(r, f, KG_TERMS_REFERENCE);
	return a < 0 || b < 0 ? -1 : a || b;
}

int kg_trial_check_outputs(struct kg_run *r, struct kg_view *v, enum kg_reason_code code, struct kg_findings *f)
{
	struct kg_findings mine = {0};
	if (!kg_check_outputs(v, code, &mine))
		return 0;
	int rc = term_bounds(r, &mine);
	if (rc < 0)
		return 0; /* recorded as kgate's own error: no verdict on this call */
	if (rc > 0) {
		mine.n = 0;
		kg_check_outputs(v, code, &mine);
	}
	for (int i = 0; i < mine.n && f->n < KG_MAX_FINDINGS; i++)
		f->f[f->n++] = mine.f[i];
	return mine.n;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts))
		;
}

static int ref_measure(struct kg_run *r, uint32_t sets, uint64_t *ns)
{
	return sets > 1 ? kg_trial_ref_batch(r, sets, r->batch_stride, ns) : kg_trial_reference(r, 1, ns);
}

int kg_trial_ref_quiet(struct kg_run *r, uint32_t sets, uint64_t *ns)
{
	if (ref_measure(r, sets, ns))
		return -1;
	uint64_t first = r->ref_flush_ns;
	for (int tries = 0; kg_timing_busy(r->ref_flush_ns, r->quiet_flush_ns); tries++) {
		if (tries < KG_QUIET_RETAKES) {
			/* the candidate's process is stopped: what its host code would start cannot start */
			sleep_ms(5);
			if (ref_measure(r, sets, ns))
				return -1;
			continue;
		}
		/* busy through every retake: the device asked again once nothing of the candidate's can
		 * run on it (its process ended, its context with it) */
		uint64_t last = r->ref_flush_ns;
		kg_session_kill_held(&r->cs);
		r->cand_dead = 1;
		sleep_ms(100);
		int quiet = 0;
		for (int k = 0; k < 2; k++) {
			if (ref_measure(r, sets, ns))
				return -1;
			quiet += !kg_timing_busy(r->ref_flush_ns, r->quiet_flush_ns);
		}
		if (quiet == 2) {
			kg_verdict_add_reason(r->v, KG_R_TIMING_TAMPERED,
					      "the device was busy beside the reference's measurements while the candidate's "
					      "process was stopped (kgate-device's flush inside them took %.1f us, then %.1f us "
					      "%d times over, %.1f us on the quiet device), and quiet again once that process was "
					      "ended (%.1f us): work the candidate left running on the device slowed the "
					      "reference it is compared with",
					      (double)first / 1e3, (double)last / 1e3, KG_QUIET_RETAKES,
					      (double)r->quiet_flush_ns / 1e3, (double)r->ref_flush_ns / 1e3);
			return -1;
		}
		kg_run_internal(r, "the device is busy with work from outside this run: kgate-device's flush inside the "
				   "reference's measurements took %.1f us (%.1f us on the quiet device), also with the "
				   "candidate's process ended: no timing is taken on a shared device",
				(double)r->ref_flush_ns / 1e3, (double)r->quiet_flush_ns / 1e3);
		return -1;
	}
	return 0;
}
