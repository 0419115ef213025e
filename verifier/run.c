/* One verification's state (run.h): its buffers and both arenas (a paged one for host runners,
 * laid out for every shape before they start; a flat one a device runner's keeper mirrors), the
 * layout of one shape, the teardown (the look-ahead's thread, the two runner sessions and
 * kgate-device, which the start phase brought up), progress and kgate's internal errors, and what
 * the candidate's ends and the checks' findings earn it as reasons. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_heartbeat.h"
#include "verifier/judge/compare.h"
#include "verifier/judge/ends.h"
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

double kg_run_secs_since(uint64_t t0)
{
	return (double)(kg_now_ns() - t0) / 1e9;
}

void kg_run_progress(struct kg_run *r, const char *fmt, ...)
{
	if (!r->plan->progress)
		return;
	char line[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (r->plan->progress == KG_PROGRESS_HEARTBEAT) {
		kg_heartbeat_phase(line); /* the heartbeat thread prints it, plain, every few seconds */
		return;
	}
	fprintf(stderr, "\r\033[K[kgate] %s: %s", r->plan->task.name, line);
	fflush(stderr);
}

void kg_run_internal(struct kg_run *r, const char *fmt, ...)
{
	if (r->v->internal_error[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->v->internal_error, sizeof(r->v->internal_error), fmt, ap);
	va_end(ap);
}

const char *kg_run_shape_str(const struct kg_run *r)
{
	return r->shape >= 0 ? r->plan->shape_str[r->shape] : "";
}

/* One reason per (code, shape): the first instance carries the details; repeats are counted and
 * their classes listed, which is what a reader needs ("fails only for large inputs"). */
int kg_run_already_reported(struct kg_run *r, enum kg_reason_code code, enum kg_input_class cls)
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

struct kg_reason *kg_run_trial_reason(struct kg_run *r, enum kg_reason_code code, enum kg_input_class cls,
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
		if (kg_run_already_reported(r, code, cls))
			continue;
		struct kg_reason *rs = kg_run_trial_reason(r, code, cls, seed, "%s%s%s%s", at, when ? when : "", when ? ": " : "",
						    x->msg);
		rs->found = x->code;
		snprintf(rs->where, sizeof(rs->where), "%s", when ? when : "");
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
	struct kg_reason *x = kg_run_trial_reason(r, code, cls, seed, "candidate %s: %s", during, what);
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
		struct kg_reason *x = kg_run_trial_reason(r, KG_R_SANDBOX_PROTOCOL, cls, seed,
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

static void ahead_join(struct kg_run *r)
{
	if (r->ahead.active)
		pthread_join(r->ahead.th, NULL);
	r->ahead.active = 0;
}

/* Waits for a call in flight and forgets it: the reference session is needed for something else
 * (a term-magnitude call, a timed call, a new shape), and the trial it was for starts over. */
void kg_run_ahead_drop(struct kg_run *r)
{
	ahead_join(r);
	r->ahead.ready = 0;
}
