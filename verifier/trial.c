/* Trials: inputs from a secret seed, one call of the trusted reference (trial_ref.c) and one of the
 * candidate in their separate sandboxed runners, the pure checks over what the call left, and their
 * findings turned into reasons. The correctness phase is a loop of trials over every shape and
 * class. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/compare.h"
#include "verifier/dtype.h"
#include "verifier/ends.h"
#include "verifier/inputs.h"
#include "verifier/parallel.h"
#include "verifier/prng.h"
#include "verifier/prof.h"
#include "verifier/run.h"

/* Trial ids (public: each names a trial, whose data comes from the run's secret key); the
 * reference's poison ids are trial_ref.c's. The report gives the key and each trial's id. */
#define SEED_PROBE 0x70726f6265ull

const char *kg_run_shape_str(const struct kg_run *r)
{
	return r->shape >= 0 ? r->plan->shape_str[r->shape] : "";
}

/* One reason per (code, shape): the first instance carries the details; repeats are counted and
 * their classes listed, which is what a reader needs ("fails only for large inputs"). */
static int already_reported(struct kg_run *r, enum kg_reason_code code, enum kg_input_class cls)
{
	for (int i = 0; i < r->v->n_reasons; i++) {
		struct kg_reason *x = &r->v->reasons[i];
		if (x->code != code || strcmp(x->shape, kg_run_shape_str(r)))
			continue;
		x->occurrences++;
		const char *name = kg_class_name(cls);
		size_t len = strlen(x->also_classes), nl = strlen(name);
		int listed = !strcmp(x->input_class, name);
		for (const char *q = x->also_classes; !listed && (q = strstr(q, name)); q += nl)
			listed = (q == x->also_classes || q[-1] == ',') && (q[nl] == ',' || !q[nl]);
		if (!listed && len + nl + 2 < sizeof(x->also_classes))
			snprintf(x->also_classes + len, sizeof(x->also_classes) - len, "%s%s", len ? "," : "", name);
		return 1;
	}
	return 0;
}

static struct kg_reason *trial_reason(struct kg_run *r, enum kg_reason_code code, enum kg_input_class cls,
				      uint64_t seed, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static struct kg_reason *trial_reason(struct kg_run *r, enum kg_reason_code code, enum kg_input_class cls,
				      uint64_t seed, const char *fmt, ...)
{
	char msg[sizeof(((struct kg_reason *)0)->message)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct kg_reason *x = kg_verdict_add_reason(r->v, code, "%s", msg);
	x->occurrences = 1;
	snprintf(x->input_class, sizeof(x->input_class), "%s", kg_class_name(cls));
	x->seed = seed;
	x->has_seed = 1;
	snprintf(x->shape, sizeof(x->shape), "%s", kg_run_shape_str(r));
	return x;
}

int kg_run_record(struct kg_run *r, const struct kg_findings *f, enum kg_input_class cls, uint64_t seed,
		  const char *when)
{
	int n = 0;
	for (int i = 0; i < f->n; i++) {
		const struct kg_finding *x = &f->f[i];
		enum kg_reason_code code = x->code;
		char at[200] = "";
		/* a wrong value that only shows away from the base shape is its own finding */
		if (r->shape > 0 && (code == KG_R_CHECK_MISMATCH || code == KG_R_CHECK_NAN ||
				     code == KG_R_CHECK_UNWRITTEN_OUTPUT)) {
			code = KG_R_CHECK_SHAPE_VARIANT;
			snprintf(at, sizeof(at), "at shape %s (not the base shape): ", kg_run_shape_str(r));
		} else if (r->shape > 0) {
			snprintf(at, sizeof(at), "at shape %s: ", kg_run_shape_str(r));
		}
		if (already_reported(r, code, cls))
			continue;
		struct kg_reason *rs = trial_reason(r, code, cls, seed, "%s%s%s%s", at, when ? when : "", when ? ": " : "",
						    x->msg);
		if (x->slot >= 0) {
			const struct kg_arena_slot *sl = &r->ca.slot[x->slot];
			snprintf(rs->tensor, sizeof(rs->tensor), "%s", r->names[x->slot]);
			rs->index = x->index;
			if (x->index >= 0 && x->code != KG_R_CHECK_CANARY)
				kg_index_str(x->index, sl->shape, sl->ndim, rs->index_str, sizeof(rs->index_str));
		}
		rs->has_values = x->has_values;
		rs->expected = x->expected;
		rs->got = x->got;
		n++;
	}
	return n;
}

void kg_run_cand_ended(struct kg_run *r, const char *during, enum kg_input_class cls, uint64_t seed, int trial)
{
	const struct kg_sb_outcome *o = &r->cs.outcome;
	char what[700];
	kg_end_describe(o, what, sizeof(what));
	enum kg_reason_code code = kg_end_reason(o->end);
	if (r->cs.fault_code) {
		/* what the parent itself caught the process doing, before it killed it */
		code = (enum kg_reason_code)r->cs.fault_code;
		snprintf(what, sizeof(what), "%s", r->cs.fault);
	} else if (kg_end_sealed_call(o, r->cs.sealed)) {
		code = KG_R_SANDBOX_DLOPEN;
		snprintf(what, sizeof(what), "after it was loaded it opened a file, mapped executable memory or "
					     "mapped a file (a run-time dlopen, new code, the arena mapped again), and the "
					     "runner's seal ended it");
	} else if (o->end == KG_SB_END_SIGNAL && (o->signo == SIGSEGV || o->signo == SIGBUS) && r->ca.paged) {
		/* the signal is the kernel's word; which address faulted nobody in that process may say */
		size_t n = strlen(what);
		snprintf(what + n, sizeof(what) - n,
			 " (a bad access: its inputs are read-only, and an inaccessible page lies after every tensor "
			 "and in front of every input; kgate installs no fault handler there and names no address)");
	}
	struct kg_reason *x = trial_reason(r, code, cls, seed, "candidate %s: %s", during, what);
	if (!trial) {
		x->has_seed = 0;
		x->input_class[0] = '\0';
	}
	r->cand_dead = 1;
}

/* What went wrong with the reference's session: how its process ended, or the session's word. */
void kg_run_ref_failure(const struct kg_run *r, int rc, const kg_error *e, char *what, size_t n)
{
	if (rc == KG_SESSION_ENDED)
		kg_end_describe(&r->rs.outcome, what, n);
	else if (rc == KG_SESSION_FAULT)
		snprintf(what, n, "%s", r->rs.fault);
	else
		snprintf(what, n, "%s", rc == KG_SESSION_FAILED ? r->rs.msg : e->msg);
}

void kg_run_cand_failed(struct kg_run *r, int rc, const kg_error *e, const char *during, const char *cmd,
			enum kg_input_class cls, uint64_t seed, int trial)
{
	if (rc == KG_SESSION_ENDED || rc == KG_SESSION_FAULT) {
		kg_run_cand_ended(r, during, cls, seed, trial);
	} else if (rc == KG_SESSION_FAILED) {
		/* its runner said the command failed: its state is the candidate's, the words its claim */
		/* (every report escapes what it prints of it) */
		struct kg_reason *x = trial_reason(r, KG_R_SANDBOX_PROTOCOL, cls, seed,
						   "candidate %s: its runner failed %s, saying \"%s\" (its claim)", during, cmd,
						   r->cs.msg);
		if (!trial) {
			x->has_seed = 0;
			x->input_class[0] = '\0';
		}
		r->cand_dead = 1;
	} else {
		kg_run_internal(r, "talking to the candidate's runner: %s", e->msg);
		r->cand_dead = 1;
	}
}


void kg_run_gen_inputs(struct kg_run *r, enum kg_input_class cls, uint64_t seed)
{
	kg_run_gen_into(r, r->shadow, cls, seed);
}

static struct kg_run_draw *draw_of(struct kg_run *r, void *const *buf)
{
	return buf == r->shadow ? &r->shadow_gen : buf == r->shadow_next ? &r->shadow_next_gen : NULL;
}

void kg_run_gen_into(struct kg_run *r, void *const *dst, enum kg_input_class cls, uint64_t seed)
{
	/* the trial's own key: its inputs say nothing of any other trial's, nor of the run's key */
	uint64_t t0 = kg_now_ns();
	kg_key tk;
	kg_key_derive(&r->plan->k_inputs, KG_DOM_INPUTS, seed, &tk);
	struct kg_run_draw *g = draw_of(r, dst);
	struct kg_run_draw local;
	if (!g)
		g = &local;
	memset(g, 0, sizeof(*g));
	memcpy(g->d.key, tk.w, sizeof(g->d.key));
	g->d.n = r->plan->task.n_inputs;
	for (int i = 0; i < r->plan->task.n_inputs; i++) {
		const struct kg_arena_slot *s = &r->ca.slot[i];
		kg_inputs_params(&g->d.t[i], s->dtype, (size_t)s->numel, s->shape, s->ndim, r->plan->task.inputs[i].role,
				 cls, r->plan->classes, &tk, i);
	}
	memset(&tk, 0, sizeof(tk));
	if (!r->dev_gen || g == &local)
		kg_run_host_inputs(r, dst);
	if (g == &local)
		memset(&local, 0, sizeof(local));
	if (dst == r->shadow)
		r->shadow_draw = ++r->draws;
	else if (dst == r->shadow_next)
		r->shadow_next_draw = ++r->draws;
	kg_prof_add(KG_PROF_GEN, t0);
}

void *const *kg_run_host_inputs(struct kg_run *r, void *const *src)
{
	struct kg_run_draw *g = draw_of(r, src);
	if (!g || g->host)
		return src;
	uint64_t t0 = kg_now_ns();
	kg_key tk;
	memcpy(tk.w, g->d.key, sizeof(tk.w));
	for (int i = 0; i < g->d.n; i++)
		kg_inputs_fill_tensor(src[i], &g->d.t[i], &tk);
	memset(&tk, 0, sizeof(tk));
	g->host = 1;
	kg_prof_add(KG_PROF_GEN, t0);
	return src;
}

const struct kg_call_draw *kg_run_device_draw(struct kg_run *r, void *const *src)
{
	const struct kg_run_draw *g = draw_of(r, src);
	return r->dev_gen && g && !g->host && g->d.n == r->plan->task.n_inputs ? &g->d : NULL;
}

/* What tells two draws' contents apart without holding them: a draw that takes no keystream
 * (zeros, ones, a square identity) is the same for every key, any other is its key's. */
static uint64_t draw_id(const struct kg_call_draw *d, int i)
{
	const struct kg_gen_tensor *t = &d->t[i];
	uint64_t h = 0x9e3779b97f4a7c15ull ^ t->n ^ ((uint64_t)t->kind << 40) ^ ((uint64_t)t->dtype << 48) ^ t->mat << 8;
	if (!kg_gen_keyless(t))
		for (int w = 0; w < 8; w++)
			h = (h ^ d->key[w]) * 0xff51afd7ed558ccdull;
	return (h ^ (h >> 29)) * 0xc4ceb9fe1a85ec53ull ^ (uint64_t)i;
}

void kg_run_view_inputs(struct kg_run *r, struct kg_view *v)
{
	v->inputs_same = r->cs.inputs_same;
	if (!v->inputs_same)
		kg_run_host_inputs(r, r->shadow);
	v->input_ids = NULL;
	if (r->dev_gen) {
		for (int i = 0; i < r->shadow_gen.d.n; i++)
			r->input_ids[i] = draw_id(&r->shadow_gen.d, i);
		v->input_ids = r->input_ids;
	}
}

void kg_run_load_inputs_from(struct kg_run *r, struct kg_arena *a, void *const *src)
{
	kg_run_host_inputs(r, src);
	for (int i = 0; i < r->plan->task.n_inputs; i++)
		kg_arena_put(a, i, src[i]);
}

static void load_inputs(struct kg_run *r, struct kg_arena *a)
{
	kg_run_load_inputs_from(r, a, r->shadow);
}

void kg_run_cand_arena(struct kg_run *r, uint64_t seed)
{
	/* the inputs come with the call (cand_expose), once its clock runs; canaries and poison now,
	 * under their own keys (plan.c): a canary or poison word tells nothing of the inputs */
	uint64_t t0 = kg_now_ns();
	kg_arena_canary_fill(&r->ca, seed);
	if (r->cs.keeper)
		kg_arena_poison_pick(&r->ca, seed); /* the keeper writes it on the device */
	else
		kg_arena_poison(&r->ca, seed);
	kg_prof_add(KG_PROF_CAND_PREP, t0);
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

void kg_run_candidate(struct kg_run *r, int flush, enum kg_input_class cls, uint64_t seed, struct kg_cand_call *c)
{
	kg_error e = {0};
	memset(c, 0, sizeof(*c));
	kg_run_cand_arena(r, seed);
	/* Generous against the reference, short enough that a hung kernel costs seconds, not the
	 * whole wall budget. */
	double deadline = 2.0 + 50.0 * (double)r->ref_ns_last / 1e9;
	struct kg_call call = {.flush = flush, .run_timeout_s = fmin(deadline, r->plan->pol.wall_s),
			       .expose = cand_expose, .expose_arg = r, .probe_ns = r->probe_ns, .probe = cand_probe,
			       .probe_arg = r};
	r->probe_ns = 0; /* one call */
	r->probe_found.hit = 0;
	if (r->cs.keeper && r->rs.keeper && r->shadow_draw && r->ref_staged_draw == r->shadow_draw &&
	    same_input_layout(&r->ra, &r->ca)) {
		/* the reference's last call staged these very inputs: copied on the device */
		call.inputs_from = 1 + r->rs.dev_slot;
		call.expose = NULL;
	} else if (r->cs.keeper && (call.draw = kg_run_device_draw(r, r->shadow))) {
		call.expose = NULL; /* drawn there */
	}
	call.keep = r->cand_keep;
	r->out_hash_ok = 0;
	int rc = kg_session_run_call(&r->cs, &call, &c->r, &e);
	r->candout_host = !call.keep;
	if (rc == KG_SESSION_FAILED && r->plan->be->needs_gpu && c->r.step && !strcmp(c->r.step, "run")) {
		/* the runner survived but the device did not: a faulting kernel (the runner's words) */
		trial_reason(r, KG_R_SANDBOX_CRASH, cls, seed, "candidate kernel failed: \"%s\" (its runner's claim)",
			     r->cs.msg);
		r->cand_dead = 1;
	} else if (rc) {
		kg_run_cand_failed(r, rc, &e, "during kg_forward", c->r.step ? c->r.step : "RUN", cls, seed, 1);
	} else if (c->r.ret) {
		if (!already_reported(r, KG_R_CHECK_RETURN_CODE, cls))
			trial_reason(r, KG_R_CHECK_RETURN_CODE, cls, seed, "kg_forward returned %d", c->r.ret);
	} else {
		c->ok = 1;
	}
}

static void cmp_from_device(const struct kg_dev_cmp *d, struct kg_cmp *c)
{
	*c = (struct kg_cmp){
		.n = d->n,
		.n_bad = d->n_bad,
		.n_nan = d->n_nan,
		.n_inf = d->n_inf,
		.first_bad = d->first_bad,
		.first_bad_got = d->first_bad_got,
		.first_bad_exp = d->first_bad_exp,
		.first_nan = d->first_nan,
		.max_abs_idx = d->max_abs_idx,
		.max_abs_err = d->max_abs_err,
		.max_abs_got = d->max_abs_got,
		.max_abs_exp = d->max_abs_exp,
		.max_rel_idx = d->max_rel_idx,
		.max_rel_err = d->max_rel_err,
		.err_sq = d->err_sq,
		.ref_sq = d->ref_sq,
		.res_sq = d->res_sq,
		.factor_max = d->factor_max,
		.tol_used = d->tol_used,
		.tol_used_idx = d->tol_used_idx,
	};
	kg_cmp_finish(c);
}

int kg_run_candout_host(struct kg_run *r)
{
	const struct kg_arena *a = &r->ca;
	if (r->candout_host)
		return 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int j = 0; j < a->n_out; j++) {
		const struct kg_arena_slot *sl = &a->slot[a->n_in + j];
		lo = sl->off < lo ? sl->off : lo;
		hi = sl->off + sl->bytes > hi ? sl->off + sl->bytes : hi;
	}
	kg_error e = {0};
	if (hi > lo && kg_keeper_fetch(&r->keeper, r->cs.dev_slot, a->used, lo, hi, &e)) {
		kg_run_internal(r, "fetching the candidate's outputs from the device (%s): %s", kg_run_shape_str(r), e.msg);
		return -1;
	}
	r->candout_host = 1;
	return 0;
}

/* The host judges: both sides' outputs on the host. 0, or -1 (recorded). */
static int host_judges(struct kg_run *r)
{
	return kg_run_refout_host(r) || kg_run_candout_host(r) ? -1 : 0;
}

int kg_run_device_judge(struct kg_run *r)
{
	const struct kg_arena *a = &r->ca;
	struct kg_dev_check chk[KG_DEV_MAX_CHECKS];
	struct kg_dev_cmp out[KG_DEV_MAX_CHECKS];
	r->judged = 0;
	if (r->refout_host || !r->dev_check || a->n_out > KG_DEV_MAX_CHECKS)
		return host_judges(r);
	for (int j = 0; j < a->n_out; j++) {
		const struct kg_arena_slot *sl = &a->slot[a->n_in + j], *rl = &r->ra.slot[a->n_in + j];
		const struct kg_tol *t = &r->tol[j];
		if (t->terms || rl->numel != sl->numel || rl->dtype != sl->dtype) /* per-element terms: the host's */
			return host_judges(r);
		/* compare.c fits row factors only where whole rows of a float tensor */
		int rows = t->factor_row > 0 && kg_dtype_is_float(sl->dtype) && sl->numel % t->factor_row == 0;
		chk[j] = (struct kg_dev_check){.off = sl->off,
					       .ref_off = rl->off,
					       .n = (uint64_t)sl->numel,
					       .poison = sl->poison,
					       .row = rows ? (uint64_t)t->factor_row : 0,
					       .atol = t->atol,
					       .rtol = t->rtol,
					       .cap = t->factor_cap,
					       .dtype = (uint32_t)sl->dtype,
					       .mode = KG_DEV_CHK_COMPARE};
	}
	uint64_t t0 = kg_now_ns();
	kg_error e = {0};
	int krc = kg_keeper_check(&r->keeper, r->cs.dev_slot, r->rs.dev_slot, chk, a->n_out, out, &e);
	if (krc == -ETIMEDOUT) {
		kg_session_kill_held(&r->cs);
		return -2;
	}
	if (krc) {
		kg_run_internal(r, "judging the candidate's outputs on the device (%s): %s", kg_run_shape_str(r), e.msg);
		return -1;
	}
	kg_prof_add(KG_PROF_JUDGE, t0);
	for (int j = 0; j < a->n_out; j++)
		r->out_hash[j] = out[j].hash;
	r->out_hash_ok = 1;
	for (int j = 0; j < a->n_out; j++)
		if (out[j].n_bad || out[j].first_unwritten >= 0) /* the host says which, and how */
			return host_judges(r);
	for (int j = 0; j < a->n_out; j++)
		cmp_from_device(&out[j], &r->cmp[j]);
	r->judged = 1;
	return 1;
}

/* Whether the reference's output is near-constant under this trial's tolerance (checks.c's
 * kg_check_degenerate), on the device where the outputs stayed there: the distance of every
 * element from 0 and from the mean of the finite ones. */
static int degenerate(struct kg_run *r, const struct kg_view *v)
{
	if (r->refout_host)
		return kg_check_degenerate(v);
	const struct kg_arena *a = &r->ra;
	struct kg_dev_check chk[KG_DEV_MAX_CHECKS];
	struct kg_dev_cmp out[KG_DEV_MAX_CHECKS];
	for (int j = 0; j < a->n_out && j < KG_DEV_MAX_CHECKS; j++) {
		const struct kg_arena_slot *sl = &a->slot[a->n_in + j];
		const struct kg_dev_cmp *st = &r->ref_stats[j];
		chk[j] = (struct kg_dev_check){.off = sl->off,
					       .n = (uint64_t)sl->numel,
					       .poison = sl->poison,
					       .atol = r->tol[j].atol,
					       .rtol = r->tol[j].rtol,
					       .c = {0.0, st->n_finite ? st->sum / (double)st->n_finite : 0.0},
					       .dtype = (uint32_t)sl->dtype,
					       .mode = KG_DEV_CHK_STATS,
					       .near = 1};
	}
	kg_error e = {0};
	if (kg_keeper_check(&r->keeper, r->rs.dev_slot, -1, chk, a->n_out, out, &e)) {
		kg_run_internal(r, "judging the reference's outputs on the device (%s): %s", kg_run_shape_str(r), e.msg);
		return 0;
	}
	for (int j = 0; j < a->n_out; j++)
		if (!out[j].far[0] || !out[j].far[1])
			return 1; /* one output a constant passes is enough */
	return 0;
}

void kg_run_view(struct kg_run *r, struct kg_view *v)
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

/* The reference arena's inputs: this call's, each element's sign cleared (floats only, task.c: the
 * sign is the top bit of each little-endian element). */
static void abs_inputs(struct kg_run *r, struct kg_arena *a)
{
	kg_run_host_inputs(r, r->shadow);
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
	if (kg_run_ref_call(r, 0, by_ref ? KG_ENTRY_TERMS : KG_ENTRY_FORWARD,
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

int kg_run_check_outputs(struct kg_run *r, struct kg_view *v, enum kg_reason_code code, struct kg_findings *f)
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
			kg_prof_add(KG_PROF_SETTLE, t0);
			return 0; /* as END left it: inputs, bands and outputs */
		}
		if (looked != 1)
			rc = looked;
		delay = 0; /* it waited already; what follows locates the change */
		if (!rc && kg_run_candout_host(r)) /* the outputs as END saw them, to compare against */
			return 1;
	}
	for (int j = 0; j < a->n_out && !rc; j++)
		kg_parallel_copy(r->snap[j], kg_arena_ptr(a, a->n_in + j), a->slot[a->n_in + j].bytes);
	if (!rc)
		rc = kg_session_call(&r->cs, KG_OP_SETTLE, delay, NULL, NULL, &e);
	if (rc == KG_SESSION_FAILED && r->plan->be->needs_gpu) {
		trial_reason(r, KG_R_CHECK_ASYNC_ESCAPE, cls, seed,
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
	kg_run_view(r, &v);
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
	kg_prof_add(KG_PROF_SETTLE, t0);
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
	int got = kg_run_ahead_take(r, cls, seed, &ref_ns);
	if (got < 0)
		return;
	if (got > 0) {
		kg_run_gen_inputs(r, cls, seed);
		if (kg_run_reference(r, 0, &ref_ns))
			return;
	}
	kg_run_view(r, &v);
	if (first_of_class) {
		r->n_class_checks++;
		if (degenerate(r, &v)) {
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
	kg_run_candidate(r, 1, cls, seed, &c);
	if (r->cand_dead)
		return;
	if (with_async && c.ok && (async_check(r, cls, seed) || r->cand_dead))
		return;
	/* before the look-ahead's call, which overwrites the device's copy of the reference's outputs */
	int judged = c.ok ? kg_run_device_judge(r) : host_judges(r);
	if (judged == -2)
		kg_run_cand_failed(r, KG_SESSION_ENDED, NULL, "after kg_forward returned", "CHECK", cls, seed, 1);
	if (judged < 0)
		return;
	v.outputs_judged = judged;
	v.output_hashes = r->out_hash_ok ? r->out_hash : NULL;
	if (next)
		kg_run_ahead_start(r, next->cls, next->seed);
	uint64_t t0 = kg_now_ns();
	probe_finding(r, &f);
	kg_run_view_inputs(r, &v);
	kg_check_canaries(&v, &f);
	kg_check_inputs(&v, &f);
	kg_check_unwritten(&v, &f);
	int mismatch = c.ok && kg_run_check_outputs(r, &v, KG_R_CHECK_MISMATCH, &f);
	if (c.ok)
		note_accuracy(r, cls);
	kg_check_tail(c.r.tail_ns, c.r.child_ns, &f);
	if (mismatch) { /* whether an output is a copy of an input: the host's copy of both */
		kg_run_host_inputs(r, r->shadow);
		if (kg_run_candout_host(r))
			return;
	}
	kg_check_shortcuts(&v, mismatch, &r->shortcuts, &f);
	kg_prof_add(KG_PROF_CHECKS, t0);
	kg_run_record(r, &f, cls, seed, "after the call");
}

void kg_phase_correctness(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	uint64_t t0 = kg_now_ns(), trial_seq = 0;
	int shapes_done = 0;
	r->trial_total = kg_plan_trial_count(p);
	for (int s = 0; s < p->n_shapes && !r->cand_dead && !r->v->internal_error[0]; s++) {
		if (kg_run_set_shape(r, s, "while setting up"))
			break;
		shapes_done = s + 1;
		int first = 1;
		for (int k = 0; k < KG_CLASS_COUNT_ && !r->cand_dead && !r->v->internal_error[0]; k++) {
			int nt = kg_plan_trials(p, s, (enum kg_input_class)k);
			for (int t = 0; t < nt && !r->cand_dead && !r->v->internal_error[0]; t++) {
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
	int complete = !r->v->internal_error[0] && r->n_trials > 0 && r->n_trials >= r->trial_total;
	char tol[160];
	snprintf(tol, sizeof(tol), "atol=%g rtol=%g rms=%g (precision %s), growth %g*n*u up to %g", p->atol, p->rtol,
		 p->rms_tol, kg_precision_name(p->pol.precision), p->growth, p->growth_cap);
	if (failed || complete)
		kg_verdict_add_check(r->v, "correctness", failed ? KG_CHECK_FAIL : KG_CHECK_PASS, kg_secs_since(t0),
				     "%d trials over %d shapes, %s", r->n_trials, p->n_shapes, tol);
	else
		kg_verdict_add_check(r->v, "correctness", KG_CHECK_SKIP, kg_secs_since(t0),
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
	r->v->t_checks_s = kg_secs_since(t0);
}
