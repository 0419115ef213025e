/* One call of the hosted .so, as the parent measures it: a host call (its inputs written once
 * the runner's CPU clock is read, the process stopped after the reply, its CPU time and threads
 * read from outside, an optional mid-call probe), a device call with kgate-device holding the arena
 * (inputs on the device, RUN, the outputs' snapshot: the keeper's span), and a run under a tool
 * (exact buffers the runner copies itself); and the calibration of those clocks on calls that do
 * nothing, before the .so is loaded. */
#include "verifier/session/session_int.h"

#include "verifier/session/keeper.h"
#include "verifier/plan/dtype.h"
#include "verifier/steps.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* KGATE_DEBUG_TIMING: the process's minor faults and context switches so far (the kernel's
 * account in /proc), to see where the CPU time a call was charged beyond its claim went. */
static void debug_counts(const struct kg_session *s, long *minflt, long *vcsw, long *ivcsw)
{
	char path[64], buf[4096];
	*minflt = *vcsw = *ivcsw = -1;
	if (!s->proc || s->proc->pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)s->proc->pid);
	FILE *f = fopen(path, "re");
	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			char *p = strrchr(buf, ')');
			/* after ") ": state ppid pgrp session tty tpgid flags minflt */
			if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %ld", minflt) != 1)
				*minflt = -1;
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)s->proc->pid);
	if ((f = fopen(path, "re"))) {
		while (fgets(buf, sizeof(buf), f)) {
			sscanf(buf, "voluntary_ctxt_switches: %ld", vcsw);
			sscanf(buf, "nonvoluntary_ctxt_switches: %ld", ivcsw);
		}
		fclose(f);
	}
}

/* After RUN's reply (or its error status): the process stopped and its threads held; what stops
 * the call first is returned. */
static int held_after_run(struct kg_session *s, int rc)
{
	if (rc == KG_SESSION_OK || rc == KG_SESSION_FAILED) {
		int h = kg_sess_hold(s, KG_OP_RUN);
		if (h)
			return h;
	}
	return rc;
}

/* A host backend's call: one RUN, timed from before the inputs exist in the runner's memory to the
 * process stopped after its reply, in the CPU time the kernel charged the process. The outputs are
 * final then: nothing in the process runs again before the parent has read them. */
static int host_call(struct kg_session *s, const struct kg_call *c, struct kg_call_result *r, kg_error *e)
{
	struct kg_wire_cmd cmd;
	struct kg_wire_reply rep = {0};
	r->step = "run";
	if (s->fault_code)
		return KG_SESSION_FAULT;
	if (s->ended)
		return KG_SESSION_ENDED;
	int rc = kg_sess_resume(s);
	if (rc)
		return rc;
	double keep = s->call_timeout_s;
	if (c->run_timeout_s > 0)
		s->call_timeout_s = c->run_timeout_s;
	kg_sess_fill_cmd(s, &cmd, KG_OP_RUN, c->entry);
	int dbg = getenv("KGATE_DEBUG_TIMING") != NULL;
	long f0 = 0, v0 = 0, i0 = 0, f1, v1, i1;
	if (dbg)
		debug_counts(s, &f0, &v0, &i0);
	/* the candidate with threads: every thread's CPU time too, no thread can run longer than the call
	 * did (the reference's calls are timed by its own clock) */
	pid_t tid0[64];
	uint64_t tcpu0[64], tcpu1[KG_SB_MAX_TASKS];
	int nt0 = -1;
	kg_error te = {0};
	if (s->watched && s->threads && s->proc && !kg_sb_proc_tasks(s->proc, &te) && s->proc->n_tasks <= 64 &&
	    !kg_sb_proc_task_cpu(s->proc, tcpu0, &te)) {
		nt0 = s->proc->n_tasks;
		memcpy(tid0, s->proc->tasks, (size_t)nt0 * sizeof(pid_t));
	}
	uint64_t cpu0 = kg_sess_cpu_ns(s), w0 = kg_now_ns(), t_sent;
	if (c->expose)
		c->expose(c->expose_arg);
	rc = kg_sess_exchange_probed(s, &cmd, c->entry, &rep, &t_sent, c, &r->probed, e);
	s->call_timeout_s = keep;
	r->parent_ns = kg_now_ns() - t_sent;
	if ((rc = held_after_run(s, rc)))
		return rc;
	uint64_t cpu1 = kg_sess_cpu_ns(s);
	r->span_ns = kg_now_ns() - w0;
	if (nt0 >= 0 && !kg_sb_proc_task_cpu(s->proc, tcpu1, &te)) {
		/* the process is stopped: its threads' times are final */
		for (int i = 0; i < s->proc->n_tasks; i++) {
			uint64_t before = 0;
			for (int k = 0; k < nt0; k++)
				if (tid0[k] == s->proc->tasks[i])
					before = tcpu0[k];
			uint64_t d = tcpu1[i] > before ? tcpu1[i] - before : 0;
			if (d > r->thread_cpu_ns)
				r->thread_cpu_ns = d;
		}
		r->thread_known = 1;
	}
	if (dbg) {
		debug_counts(s, &f1, &v1, &i1);
		fprintf(stderr,
			"[kgate] %s call: cpu %.1f us claim %.1f us, span %.1f us (round trip %.1f), %ld minor faults, "
			"%ld+%ld switches\n",
			s->watched ? "cand" : "ref", (double)(cpu1 - cpu0) / 1e3, (double)rep.elapsed_ns / 1e3,
			(double)r->span_ns / 1e3, (double)r->parent_ns / 1e3, f1 - f0, v1 - v0, i1 - i0);
	}
	r->ret = rep.rc;
	r->child_ns = rep.elapsed_ns;
	r->tail_ns = rep.info;
	r->l2_flags = rep.flags;
	r->cpu_known = cpu0 && cpu1 >= cpu0;
	r->cpu_ns = r->cpu_known ? cpu1 - cpu0 : 0;
	r->step = NULL;
	return KG_SESSION_OK;
}

int kg_session_dev_stages(const struct kg_session *s)
{
	return s->keeper && s->arena->n_in + s->arena->n_out <= KG_DEV_MAX_RANGES;
}

/* What the keeper stages on the device rather than from the host arena: every output poisoned
 * there with the arena's pattern (picked, not written, by kg_arena_poison_pick), and the inputs
 * copied from another slot or drawn there when the call says so; in offset order. A draw made at
 * another layout than the arena's (its tensor not exactly its slot's bytes) is kgate's own error,
 * said here rather than by kgate-device's refusal of the START. */
int kg_session_stage_plan(const struct kg_session *s, const struct kg_call *c, struct kg_keeper_stage *st, kg_error *e)
{
	const struct kg_arena *a = s->arena;
	st->n = 0;
	st->src_slot = c->inputs_from > 0 ? c->inputs_from - 1 : 0;
	const struct kg_call_draw *d = c->inputs_from <= 0 && s->keeper && (s->keeper->caps & KG_DEV_CAP_GEN) ? c->draw : NULL;
	if (d)
		memcpy(st->key, d->key, sizeof(st->key));
	/* more tensors than one START stages (a whole model's): all of it from the host arena, where
	 * the caller wrote the inputs and the poison (kg_session_dev_stages) */
	for (int i = 0; kg_session_dev_stages(s) && i < a->n_in + a->n_out && st->n < KG_DEV_MAX_RANGES; i++) {
		const struct kg_arena_slot *sl = &a->slot[i];
		int out = i >= a->n_in;
		if (!sl->bytes || (!out && c->inputs_from <= 0 && (!d || i >= d->n)))
			continue;
		struct kg_dev_range g = {.off = sl->off, .bytes = sl->bytes};
		if (out) {
			g.kind = KG_DEV_R_FILL;
			g.elem = (uint32_t)kg_dtype_size(sl->dtype);
			g.pattern = sl->poison;
		} else if (c->inputs_from > 0) {
			g.kind = KG_DEV_R_SLOT;
		} else {
			g.kind = KG_DEV_R_GEN;
			g.gen = d->t[i];
			if (!kg_gen_valid(&g.gen, g.bytes))
				return kg_err(e, -EINVAL,
					      "input %d's draw (%llu elements of dtype %u) is not of the arena's layout (%llu "
					      "bytes at shape %s): drawn at another shape",
					      i, (unsigned long long)g.gen.n, g.gen.dtype, (unsigned long long)g.bytes, a->dims);
		}
		int j = st->n++;
		while (j > 0 && st->range[j - 1].off > g.off) {
			st->range[j] = st->range[j - 1];
			j--;
		}
		st->range[j] = g;
	}
	return 0;
}

/* The mid-call probe's ranges (device/wire.h): everything before the first output (the inputs and
 * their bands), a keyed window of it where it is larger than the capture, and the bands after the
 * last output (8-byte words, clear of the outputs). */
static void probe_plan(const struct kg_session *s, uint64_t probe_ns, struct kg_keeper_stage *st)
{
	uint64_t lo, hi, in_hi = kg_sess_in_hi(s), used = s->arena->used;
	kg_arena_out_span(s->arena, &lo, &hi);
	uint64_t room = KG_DEV_PROBE_MAX - KG_ARENA_GUARD * 2, a = 0, b = in_hi / 8 * 8;
	if (b > room) { /* a window of the inputs at a keyed place, on a 256-byte edge */
		uint64_t k = probe_ns * 0x9e3779b97f4a7c15ull;
		a = (k >> 17) % (b - room) / 256 * 256;
		b = a + room;
	}
	int n = 0;
	if (b > a) {
		st->probe_off[n] = a;
		st->probe_bytes[n++] = b - a;
	}
	uint64_t t = (hi + 7) / 8 * 8, u = used / 8 * 8;
	if (hi > lo && u > t && u - t <= KG_ARENA_GUARD * 2) {
		st->probe_off[n] = t;
		st->probe_bytes[n++] = u - t;
	}
	st->probe_ns = n ? probe_ns : 0;
}

/* A device call with kgate-device holding the arena: the keeper stages the inputs where the
 * candidate cannot see them and starts the clock, then copies them onto the runner's arena and
 * flushes; the runner's process is resumed for RUN alone; the moment its reply is in, the keeper
 * snapshots the outputs (the clock stops when it has them) and refreshes the host arena, while the
 * process is stopped. Before LOAD (the calibration) nothing is copied: the span is then the
 * protocol's own, which every later span is charged less. */
static int keeper_call(struct kg_session *s, const struct kg_call *c, struct kg_call_result *r, kg_error *e)
{
	struct kg_wire_reply rep = {0};
	if (s->fault_code)
		return KG_SESSION_FAULT;
	if (s->ended)
		return KG_SESSION_ENDED;
	uint64_t tp = kg_now_ns();
	s->inputs_same = 0;
	if (c->expose)
		c->expose(c->expose_arg);
	size_t bytes = s->loaded ? s->arena->used : 0;
	uint64_t lo = 0, hi = 0, t0 = 0;
	struct kg_keeper_ended ed = {0};
	if (s->loaded)
		kg_arena_out_span(s->arena, &lo, &hi);
	r->step = "upload";
	struct kg_keeper_stage st = {0};
	/* a batch before LOAD: the gated calibration's, of calls that do nothing */
	uint32_t sets = c->sets > 1 && (s->loaded || s->gated) ? c->sets : 1;
	if (s->loaded && kg_session_stage_plan(s, c, &st, e))
		return -EINVAL;
	if (sets > 1) {
		st.sets = sets;
		st.stride = c->stride;
	}
	if (s->gated) {
		st.gate = 1;
		st.out_lo = lo;
		st.out_hi = hi;
		if (s->loaded && c->probe_ns && sets == 1)
			probe_plan(s, c->probe_ns, &st);
	}
	r->sets = sets;
	/* read while the process is stopped, before the clock starts: the same figure as after
	 * START, without the reads' time inside the span */
	uint64_t cpu0 = kg_sess_cpu_ns(s);
	struct kg_keeper_begun bg;
	int rc = kg_keeper_begin(s->keeper, s->dev_slot, bytes, c->flush, &st, &bg, e);
	t0 = bg.t0;
	r->mem_free_start = bg.mem_free;
	if (rc == -ETIMEDOUT && s->watched) {
		/* the device would not let the keeper copy: work the candidate left running holds it */
		return kg_session_kill_held(s);
	}
	if (rc)
		return rc;
	if (s->watched)
		tp = kg_steps_add(KG_STEP_CAND_START, tp);
	double keep = s->call_timeout_s;
	r->step = "run";
	if (c->run_timeout_s > 0)
		s->call_timeout_s = c->run_timeout_s;
	if ((rc = kg_sess_resume(s))) {
		s->call_timeout_s = keep;
		return rc;
	}
	struct kg_wire_cmd cmd;
	kg_sess_fill_cmd(s, &cmd, KG_OP_RUN, c->entry);
	if (sets > 1) {
		cmd.sets = sets;
		cmd.stride = c->stride;
	}
	cmd.gate = s->gated ? bg.tok : 0;
	uint64_t sent;
	rc = kg_sess_exchange(s, &cmd, c->entry, &rep, &sent, e);
	r->parent_ns = kg_now_ns() - sent;
	s->call_timeout_s = keep;
	/* The snapshot at once, the stop after it: how long stopping the process and counting its
	 * threads takes is no part of the call. Work left running on the device then either lands in
	 * the snapshot's time (charged) or after it (SETTLE's check.async_escape); none is credited. */
	int krc = 0;
	if (s->watched)
		tp = kg_steps_add(KG_STEP_CAND_RUN, tp);
	if (rc == KG_SESSION_OK) {
		r->step = "download";
		krc = kg_keeper_end(s->keeper, s->dev_slot, bytes, lo, hi, kg_sess_in_hi(s), c->keep, &ed, e);
		s->inputs_same = !krc && ed.in_state == KG_DEV_IN_SAME;
		s->in_diff = ed.in_diff;
		r->gate = ed.gate;
		r->gate_set = ed.gate_set;
		r->flush_ns = ed.flush_ns;
		r->flush_max_ns = ed.flush_max_ns;
		r->dev_probe_state = ed.probe_state;
		r->dev_probe_diff = ed.probe_diff;
		r->mem_free_end = ed.mem_free;
	}
	rc = held_after_run(s, rc);
	if (s->watched)
		kg_steps_add(KG_STEP_CAND_END, tp);
	if (rc)
		return rc;
	uint64_t cpu1 = kg_sess_cpu_ns(s);
	if (krc == -ETIMEDOUT && s->watched) {
		/* the device did not let the keeper copy: work the candidate left running holds it */
		return kg_session_kill_held(s);
	}
	if (krc)
		return krc;
	r->copy_ns = ed.copy_ns;
	r->host_span_ns = ed.t_ns > t0 ? ed.t_ns - t0 : 0;
	/* the device's clock where the keeper measured it: the host's waits for the keeper's stream at
	 * either end are no part of the call (the calibration is measured the same way) */
	r->span_ns = ed.dev_ns && ed.dev_ns <= r->host_span_ns ? ed.dev_ns : r->host_span_ns;
	r->download_ns = r->host_span_ns > r->parent_ns ? r->host_span_ns - r->parent_ns : 0;
	/* The keeper's own work inside the span: the inputs' copy onto the device arena (read and
	 * written once), the flush (written once) and the outputs' snapshot (read and written once).
	 * At the device's measured copy rate that is the least it can take, whoever else is on the
	 * device: subtracted, and no more. */
	uint64_t mbps = s->keeper->ceiling_mbps;
	/* (a batch's: every set's inputs alone, the rest of its image went over before the clock) */
	double copied = (double)bytes;
	if (sets > 1) {
		copied = 0;
		for (int i = 0; i < s->arena->n_in; i++)
			copied += (double)s->arena->slot[i].bytes * sets;
	}
	/* (a gated batch flushes before every set's release) */
	double flushes = c->flush ? (s->gated ? (double)sets : 1.0) : 0;
	double moved = 2.0 * copied + flushes * (double)s->keeper->flush_bytes + 2.0 * (double)(hi - lo) * sets;
	r->snap_ns = mbps ? (uint64_t)(moved * 1000.0 / (double)mbps) : 0;
	r->ret = rep.rc;
	r->child_ns = rep.elapsed_ns;
	r->tail_ns = rep.info;
	r->l2_flags = rep.flags;
	s->l2_flags |= rep.flags;
	r->cpu_known = cpu0 && cpu1 >= cpu0;
	r->cpu_ns = r->cpu_known ? cpu1 - cpu0 : 0;
	if (getenv("KGATE_DEBUG_TIMING"))
		fprintf(stderr, "[kgate] %s device call: span %.1f us (host %.1f, RUN round trip %.1f, claim %.1f), snapshot %.1f us "
				"(least %.1f), %zu bytes, %u sets%s, flush %.1f us (most %.1f)\n",
			s->watched ? "cand" : "ref", (double)r->span_ns / 1e3, (double)r->host_span_ns / 1e3, (double)r->parent_ns / 1e3,
			(double)r->child_ns / 1e3, (double)r->copy_ns / 1e3, (double)r->snap_ns / 1e3, bytes, sets,
			s->gated ? " gated" : "", (double)r->flush_ns / 1e3, (double)r->flush_max_ns / 1e3);
	r->step = NULL;
	return KG_SESSION_OK;
}

int kg_session_run_call(struct kg_session *s, const struct kg_call *c, struct kg_call_result *r, kg_error *e)
{
	struct kg_wire_reply rep = {0};
	memset(r, 0, sizeof(*r));
	if (s->host)
		return host_call(s, c, r, e);
	if (s->keeper)
		return keeper_call(s, c, r, e);
	uint64_t cpu0 = 0, cpu1 = 0;
	if (c->expose)
		c->expose(c->expose_arg);
	r->step = "upload";
	int rc = kg_session_call(s, KG_OP_UPLOAD, 0, NULL, NULL, e);
	if (!rc) {
		double keep = s->call_timeout_s;
		r->step = "run";
		if (c->run_timeout_s > 0)
			s->call_timeout_s = c->run_timeout_s;
		cpu0 = kg_sess_cpu_ns(s);
		rc = kg_session_call(s, KG_OP_RUN, c->entry, &rep, &r->parent_ns, e);
		s->call_timeout_s = keep;
	}
	if (!rc) {
		r->ret = rep.rc;
		r->child_ns = rep.elapsed_ns;
		r->tail_ns = rep.info;
		r->snap_ns = rep.snap_ns;
		r->l2_flags = rep.flags;
		s->l2_flags |= rep.flags;
		r->step = "download";
		rc = kg_session_call(s, KG_OP_DOWNLOAD, 0, NULL, &r->download_ns, e);
		r->span_ns = r->parent_ns + r->download_ns;
		cpu1 = rc ? 0 : kg_sess_cpu_ns(s);
		r->cpu_known = cpu0 && cpu1 >= cpu0;
		r->cpu_ns = r->cpu_known ? cpu1 - cpu0 : 0;
	}
	if (!rc)
		r->step = NULL;
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#define KG_CAL_N 9
#define KG_CAL_SETS 8 /* a gated batch's calibration: sets of calls that do nothing */

static uint64_t median_u64(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
	return v[n / 2];
}

/* The trusted clock's calibration: NOPs and calls that do nothing (the first three flushed, as
 * timed calls are); before LOAD, so that no untrusted code can slow them down to widen the
 * allowance it is later measured against. A gated session's calls show whether the gate works
 * across the two processes here: a mark of the trusted runner's that never came turns the gate
 * off for the session (gate_off), and the calibration is taken again without it. Gated, batches
 * of calls that do nothing give what each further set adds. */
int kg_sess_calibrate(struct kg_session *s, kg_error *e)
{
	uint64_t nop[KG_CAL_N], run[KG_CAL_N], span[KG_CAL_N], cpu[KG_CAL_N], fl[KG_CAL_N];
	int rc = 0, nfl = 0;
	for (int i = 0; i < KG_CAL_N && !rc; i++)
		rc = kg_session_call(s, KG_OP_NOP, 0, NULL, &nop[i], e);
	for (int i = 0; i < KG_CAL_N && !rc; i++) {
		struct kg_call_result r;
		rc = kg_session_run_call(s, &(struct kg_call){.flush = i < 3}, &r, e);
		if (rc == KG_SESSION_FAILED && s->gated) {
			/* the trusted runner could not queue its marks: ungated, from the start */
			s->gated = 0;
			snprintf(s->gate_off, sizeof(s->gate_off), "the trusted runner's gated call failed: %.60s", s->msg);
			return kg_sess_calibrate(s, e);
		}
		run[i] = r.parent_ns;
		span[i] = r.span_ns;
		cpu[i] = r.cpu_ns;
		if (!rc && r.flush_ns)
			fl[nfl++] = r.flush_ns;
		if (!rc && s->gated && r.gate != KG_DEV_GATE_OK) {
			/* the trusted runner's mark did not come: no gated call can be judged here */
			s->gated = 0;
			snprintf(s->gate_off, sizeof(s->gate_off), "the trusted runner's marks did not reach kgate-device (%s)",
				 r.gate == KG_DEV_GATE_NO_ARM ? "ARMED" : "DONE");
			return kg_sess_calibrate(s, e);
		}
	}
	if (rc)
		return rc;
	s->nop_ns = median_u64(nop, KG_CAL_N);
	s->cal_run_ns = median_u64(run, KG_CAL_N);
	s->cal_span_ns = median_u64(span, KG_CAL_N);
	s->cal_cpu_ns = median_u64(cpu, KG_CAL_N);
	s->cal_flush_ns = nfl ? median_u64(fl, nfl) : 0;
	s->cal_set_ns = 0;
	if (s->gated && s->dev_sets >= KG_CAL_SETS) {
		uint64_t b[5];
		for (int i = 0; i < 5 && !rc; i++) {
			struct kg_call_result r;
			rc = kg_session_run_call(s, &(struct kg_call){.sets = KG_CAL_SETS, .stride = s->dev_stride}, &r, e);
			b[i] = r.span_ns;
			if (!rc && r.gate != KG_DEV_GATE_OK) {
				s->gated = 0;
				snprintf(s->gate_off, sizeof(s->gate_off), "a batch's marks did not reach kgate-device");
				return kg_sess_calibrate(s, e);
			}
		}
		if (rc)
			return rc;
		uint64_t m = median_u64(b, 5);
		s->cal_set_ns = m > s->cal_span_ns ? (m - s->cal_span_ns) / (KG_CAL_SETS - 1) : 0;
	}
	return 0;
}

