/* Parent side of the runner protocol: spawning kgate-run (or an interpreted runner, the torch
 * reference's) in the sandbox, handing it the arena and the control socket, calibrating the trusted
 * clock on calls that do nothing before the .so is loaded, measuring every call with the parent's
 * clocks (its wall clock, and the CPU time the kernel charges the runner), and turning every way the
 * runner can end into a structured outcome.
 *
 * The runner's process is a black box once the .so is loaded. So: it runs only while a command is
 * outstanding (the parent stops it with SIGSTOP as soon as the reply is in, and resumes it right
 * before the next command): nothing in it computes between commands, and its memory holds still
 * while the parent reads the outputs. A host backend's call is timed from before the parent writes
 * the call's inputs (they are not readable earlier) to the moment the process is stopped, in the CPU
 * time the kernel charged it. Every command has a deadline scaled to its work. Exactly one
 * well-formed reply per command: anything else on the channel (a second or early message, a wrong
 * op or sequence number, a torn record) is the candidate's fault, named and ended at once. */
#include "verifier/session.h"

#include "verifier/resolve.h"
#include "device/keeper.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long a stopped runner may take to hold still (a thread in uninterruptible sleep) */
#define STOP_TIMEOUT_MS 3000

/* The process ends now (after linger_ms of grace, or at once) and is reaped into outcome. */
static void end_process(struct kg_session *s, int linger_ms)
{
	if (s->ended)
		return;
	if (s->sb && (!linger_ms || kg_sb_wait_fd(s->sb, -1, linger_ms) != KG_SB_ENDED))
		kg_sb_kill(s->sb, KG_SB_END_KILLED);
	kg_sb_wait(s->sb, &s->outcome);
	s->ended = 1;
	if (s->proc)
		kg_sb_proc_detach(s->proc);
}

static int ended(struct kg_session *s)
{
	/* the process may still run with its channel closed: it ends now, not at the watchdog */
	end_process(s, s->linger_ms);
	return KG_SESSION_ENDED;
}

/* The candidate broke the rules in a way the parent saw: named, and its process ended at once. */
static int fault(struct kg_session *s, enum kg_reason_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fault(struct kg_session *s, enum kg_reason_code code, const char *fmt, ...)
{
	if (!s->fault_code) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->fault, sizeof(s->fault), fmt, ap);
		va_end(ap);
		s->fault_code = (int)code;
	}
	if (s->sb)
		end_process(s, 0);
	return KG_SESSION_FAULT;
}

/* One record off the channel; with pid set, the sender's pid as the kernel vouches for it
 * (SCM_CREDENTIALS, translated into our pid namespace), 0 when none came along. */
static ssize_t recv_record(int fd, struct kg_wire_reply *r, pid_t *pid)
{
	struct iovec iov = {.iov_base = r, .iov_len = sizeof(*r)};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = pid ? u.buf : NULL,
			    .msg_controllen = pid ? sizeof(u.buf) : 0};
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n > 0 && (mh.msg_flags & MSG_TRUNC))
		n = (ssize_t)sizeof(*r) + 1; /* longer than any reply: torn */
	if (pid) {
		*pid = 0;
		for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
			struct ucred uc;
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_CREDENTIALS ||
			    c->cmsg_len != CMSG_LEN(sizeof(uc)))
				continue;
			memcpy(&uc, CMSG_DATA(c), sizeof(uc));
			*pid = uc.pid;
		}
	}
	return n;
}

/* Receives the one reply to (op, seq), servicing the sandbox while waiting. */
static int recv_reply_from(struct kg_session *s, uint32_t op, uint64_t seq, struct kg_wire_reply *r,
			   double timeout_s, pid_t *pid)
{
	uint64_t deadline = kg_now_ns() + (uint64_t)(timeout_s * 1e9);
	for (;;) {
		uint64_t now = kg_now_ns();
		if (now >= deadline) {
			kg_sb_kill(s->sb, KG_SB_END_TIMEOUT);
			return ended(s);
		}
		int ms = (int)((deadline - now + 999999) / 1000000);
		int w = kg_sb_wait_fd(s->sb, s->ctl, ms);
		if (w == KG_SB_ENDED)
			return ended(s);
		if (w <= 0)
			continue;
		ssize_t n = recv_record(s->ctl, r, pid);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return ended(s); /* EOF: the runner is gone, or closed its end */
		/* The runner sends whole records, each the one answer to the command outstanding. */
		if (n != (ssize_t)sizeof(*r) || r->magic != KG_WIRE_MAGIC)
			return fault(s, KG_R_SANDBOX_PROTOCOL,
				     "a malformed record of %zd bytes on the control channel, answering %s", n,
				     kg_wire_op_name(op));
		if (r->op != op || r->seq != seq)
			return fault(s, KG_R_SANDBOX_PROTOCOL,
				     "a reply to %s #%llu on the control channel where %s #%llu was outstanding",
				     kg_wire_op_name(r->op), (unsigned long long)r->seq, kg_wire_op_name(op),
				     (unsigned long long)seq);
		r->msg[sizeof(r->msg) - 1] = '\0';
		if (r->status != KG_WS_OK) {
			snprintf(s->msg, sizeof(s->msg), "%s", r->msg);
			return KG_SESSION_FAILED;
		}
		return KG_SESSION_OK;
	}
}

/* The runner's CPU time so far; 0 when it cannot be read (no pid, or the process is gone). */
static uint64_t runner_cpu_ns(const struct kg_session *s)
{
	struct timespec ts;
	if (!s->has_cpu_clock || clock_gettime(s->cpu_clock, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Nothing may wait on the channel while the process is stopped: it wrote no reply to anything. */
static int channel_quiet(struct kg_session *s, const char *when)
{
	char c;
	ssize_t n = recv(s->ctl, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return fault(s, KG_R_SANDBOX_PROTOCOL, "a message on the control channel %s: it answered no command",
			     when);
	return KG_SESSION_OK;
}

/* Before a command: the process resumes (it was stopped after the last reply). */
static int resume(struct kg_session *s)
{
	if (!s->proc || !s->proc->stopped)
		return KG_SESSION_OK;
	int rc = channel_quiet(s, "while it was stopped");
	if (rc)
		return rc;
	kg_error e = {0};
	if (kg_sb_proc_cont(s->proc, &e))
		return ended(s);
	return KG_SESSION_OK;
}

static int task_allowed(const struct kg_session *s, pid_t tid)
{
	for (int i = 0; i < s->n_allowed; i++)
		if (s->allowed[i] == tid)
			return 1;
	return 0;
}

/* After a reply: the process is stopped and holds still until the next command; a watched one's
 * threads are held to what it may have. */
static int hold(struct kg_session *s, uint32_t op)
{
	if (!s->proc)
		return KG_SESSION_OK;
	kg_error e = {0};
	int rc = kg_sb_proc_stop(s->proc, STOP_TIMEOUT_MS, &e);
	if (rc == -ESRCH)
		return ended(s);
	if (rc)
		return fault(s, KG_R_SANDBOX_TIMEOUT, "%s", e.msg);
	if ((rc = channel_quiet(s, "after its reply")))
		return rc;
	if (!s->watched)
		return KG_SESSION_OK;
	if (op == KG_OP_HELLO) {
		/* the threads of a process nothing untrusted has run in yet: what it may keep, less
		 * the loader once the .so is loaded */
		s->n_allowed = 0;
		for (int i = 0; i < s->proc->n_tasks && s->n_allowed < (int)KG_ARRAY_LEN(s->allowed); i++)
			if (s->proc->tasks[i] != s->loader)
				s->allowed[s->n_allowed++] = s->proc->tasks[i];
		return KG_SESSION_OK;
	}
	if (!s->loaded || s->threads)
		return KG_SESSION_OK;
	for (int i = 0; i < s->proc->n_tasks; i++) {
		pid_t t = s->proc->tasks[i];
		if (task_allowed(s, t))
			continue;
		return fault(s, KG_R_SANDBOX_THREAD,
			     t == s->loader ? "the loader thread (tid %d), on which the candidate's constructors ran, "
					      "is still alive after the load (%d threads): it would run unsealed"
					    : "thread %d runs in the candidate's process (%d threads), which may run only "
					      "those it had before the load: threads are off",
			     (int)t, s->proc->n_tasks);
	}
	return KG_SESSION_OK;
}

/* How long a command may take, scaled to its work: a stalling runner is found in seconds. The
 * trusted runners keep the session's generous limit. */
static double deadline_s(const struct kg_session *s, enum kg_wire_op op, uint32_t arg)
{
	if (!s->watched)
		return s->call_timeout_s + (op == KG_OP_SETTLE ? arg / 1000.0 : 0);
	/* sanitizer builds run everything several times slower */
	double k = getenv("KGATE_SANITIZE") ? 4.0 : 1.0, base = 3.0 * k;
	double bytes = s->arena ? (double)s->arena->used : 0;
	switch (op) {
	case KG_OP_LOAD:
		return 30.0 * k; /* constructors, a device module's load */
	case KG_OP_UPLOAD:
	case KG_OP_DOWNLOAD:
	case KG_OP_SETUP:
		return base + k * bytes / 1e9; /* copies at >= 1 GB/s, device allocations */
	case KG_OP_FLUSH:
		return base + k * (double)s->cal_flush_cpu_ns / 1e8; /* ten times a calibrated flush */
	case KG_OP_SETTLE:
		return base + arg / 1000.0;
	case KG_OP_RUN:
		return s->call_timeout_s; /* the caller's, from the reference's time */
	default:
		return base;
	}
}

static void fill_cmd(const struct kg_session *s, struct kg_wire_cmd *cmd, enum kg_wire_op op, uint32_t arg)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->magic = KG_WIRE_MAGIC;
	cmd->op = op;
	cmd->delay_ms = op == KG_OP_SETTLE ? arg : 0;
	cmd->entry = op == KG_OP_RUN ? arg : 0;
	cmd->arena_size = s->arena->used;
	cmd->n_in = (uint32_t)s->arena->n_in;
	cmd->n_out = (uint32_t)s->arena->n_out;
	for (int i = 0; i < s->arena->n_in + s->arena->n_out; i++) {
		const struct kg_arena_slot *sl = &s->arena->slot[i];
		cmd->t[i].offset = sl->off;
		cmd->t[i].dtype = sl->dtype;
		cmd->t[i].ndim = sl->ndim;
		memcpy(cmd->t[i].shape, sl->shape, sizeof(cmd->t[i].shape));
	}
	if (op == KG_OP_SETUP)
		snprintf(cmd->path, sizeof(cmd->path), "%s", s->arena->dims);
}

/* Sends cmd (the process resumed already) and waits for its one reply; t_sent gets the moment it
 * left. With a probe (c, host RUNs), the process is stopped once mid-call for it. */
static int exchange_probed(struct kg_session *s, struct kg_wire_cmd *cmd, uint32_t arg, struct kg_wire_reply *r,
			   uint64_t *t_sent, const struct kg_call *c, int *probed, kg_error *e)
{
	cmd->seq = ++s->seq;
	*t_sent = kg_now_ns();
	ssize_t n = send(s->ctl, cmd, sizeof(*cmd), MSG_NOSIGNAL);
	if (n != (ssize_t)sizeof(*cmd)) {
		if (n < 0 && errno != EPIPE && errno != ECONNRESET)
			return kg_err(e, -errno, "sending to the runner: %s", strerror(errno));
		return ended(s);
	}
	double limit = deadline_s(s, (enum kg_wire_op)cmd->op, arg);
	if (c && c->probe && c->probe_ns && s->proc && (double)c->probe_ns < limit * 1e9) {
		/* to within a few microseconds: the sandbox's waits are in milliseconds, so the last
		 * one is a sleep, after which a reply already there means the call was done */
		uint64_t at = *t_sent + c->probe_ns;
		int w = 0;
		for (uint64_t now = kg_now_ns(); !w && now + 2000000 < at; now = kg_now_ns())
			w = kg_sb_wait_fd(s->sb, s->ctl, (int)((at - now) / 1000000) - 1);
		if (w == KG_SB_ENDED)
			return ended(s);
		uint64_t now = kg_now_ns();
		if (!w && now < at) {
			struct timespec ts = {(time_t)((at - now) / 1000000000u), (long)((at - now) % 1000000000u)};
			nanosleep(&ts, NULL);
		}
		struct pollfd pf = {.fd = s->ctl, .events = POLLIN};
		if (!w && poll(&pf, 1, 0) > 0)
			w = 1;
		if (!w) {
			/* still inside the call: its memory as it is now, held still */
			kg_error pe = {0};
			int rc = kg_sb_proc_stop(s->proc, STOP_TIMEOUT_MS, &pe);
			if (rc == -ESRCH)
				return ended(s);
			if (rc)
				return fault(s, KG_R_SANDBOX_TIMEOUT, "%s", pe.msg);
			c->probe(c->probe_arg);
			*probed = 1;
			if (kg_sb_proc_cont(s->proc, &pe))
				return ended(s);
		}
		limit -= (double)(kg_now_ns() - *t_sent) / 1e9;
	}
	return recv_reply_from(s, cmd->op, cmd->seq, r, limit > 0.001 ? limit : 0.001, NULL);
}

static int exchange(struct kg_session *s, struct kg_wire_cmd *cmd, uint32_t arg, struct kg_wire_reply *r,
		    uint64_t *t_sent, kg_error *e)
{
	return exchange_probed(s, cmd, arg, r, t_sent, NULL, NULL, e);
}

int kg_session_call(struct kg_session *s, enum kg_wire_op op, uint32_t arg, struct kg_wire_reply *r,
		    uint64_t *parent_ns, kg_error *e)
{
	struct kg_wire_cmd cmd;
	struct kg_wire_reply tmp;
	if (!r)
		r = &tmp;
	if (s->fault_code)
		return KG_SESSION_FAULT;
	if (s->ended)
		return KG_SESSION_ENDED;
	if (s->keeper && op == KG_OP_SETTLE) {
		/* the device arena is the keeper's: the runner's process stays stopped */
		memset(r, 0, sizeof(*r));
		uint64_t t = kg_now_ns();
		int krc = kg_keeper_settle(s->keeper, s->dev_slot, s->arena->used, arg, e);
		if (parent_ns)
			*parent_ns = kg_now_ns() - t;
		return krc;
	}
	int rc = resume(s);
	if (rc)
		return rc;
	fill_cmd(s, &cmd, op, arg);
	uint64_t t0;
	rc = exchange(s, &cmd, arg, r, &t0, e);
	if (parent_ns)
		*parent_ns = kg_now_ns() - t0;
	/* a failed command is answered too: the process holds still after it all the same */
	if (rc == KG_SESSION_OK || rc == KG_SESSION_FAILED) {
		int h = hold(s, op);
		if (h)
			return h;
	}
	return rc;
}

int kg_session_setup(struct kg_session *s, kg_error *e)
{
	return kg_session_call(s, KG_OP_SETUP, 0, NULL, NULL, e);
}

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
	int rc = resume(s);
	if (rc)
		return rc;
	double keep = s->call_timeout_s;
	if (c->run_timeout_s > 0)
		s->call_timeout_s = c->run_timeout_s;
	fill_cmd(s, &cmd, KG_OP_RUN, c->entry);
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
	uint64_t cpu0 = runner_cpu_ns(s), w0 = kg_now_ns(), t_sent;
	if (c->expose)
		c->expose(c->expose_arg);
	rc = exchange_probed(s, &cmd, c->entry, &rep, &t_sent, c, &r->probed, e);
	s->call_timeout_s = keep;
	r->parent_ns = kg_now_ns() - t_sent;
	if (rc == KG_SESSION_OK || rc == KG_SESSION_FAILED) {
		int h = hold(s, KG_OP_RUN);
		if (h)
			return h;
	}
	if (rc)
		return rc;
	uint64_t cpu1 = runner_cpu_ns(s);
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

/* The outputs' span in the arena: from the first output's offset to the end of the last. */
static void out_range(const struct kg_arena *a, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (int i = a->n_in; i < a->n_in + a->n_out; i++) {
		const struct kg_arena_slot *sl = &a->slot[i];
		if (sl->off < *lo)
			*lo = sl->off;
		if (sl->off + sl->bytes > *hi)
			*hi = sl->off + sl->bytes;
	}
	if (*hi <= *lo || *hi > a->used)
		*lo = *hi = 0;
}

/* A device call with kgate-device holding the arena: the keeper writes the inputs (the clock
 * starts once they are all on the device), the runner's process is resumed for RUN alone, and
 * once it is stopped again the keeper snapshots the outputs (the clock stops when it has them) and
 * refreshes the host arena. Before LOAD (the calibration) nothing is copied: the span is then the
 * protocol's own, which every later span is charged less. */
static int keeper_call(struct kg_session *s, const struct kg_call *c, struct kg_call_result *r, kg_error *e)
{
	struct kg_wire_reply rep = {0};
	if (s->fault_code)
		return KG_SESSION_FAULT;
	if (s->ended)
		return KG_SESSION_ENDED;
	if (c->expose)
		c->expose(c->expose_arg);
	size_t bytes = s->loaded ? s->arena->used : 0;
	uint64_t lo = 0, hi = 0, t0 = 0, t1 = 0;
	if (s->loaded)
		out_range(s->arena, &lo, &hi);
	r->step = "upload";
	int rc = kg_keeper_begin(s->keeper, s->dev_slot, bytes, c->flush, &t0, e);
	if (rc)
		return rc;
	double keep = s->call_timeout_s;
	r->step = "run";
	if (c->run_timeout_s > 0)
		s->call_timeout_s = c->run_timeout_s;
	uint64_t cpu0 = runner_cpu_ns(s);
	if ((rc = resume(s))) {
		s->call_timeout_s = keep;
		return rc;
	}
	struct kg_wire_cmd cmd;
	fill_cmd(s, &cmd, KG_OP_RUN, c->entry);
	uint64_t sent;
	rc = exchange(s, &cmd, c->entry, &rep, &sent, e);
	r->parent_ns = kg_now_ns() - sent;
	s->call_timeout_s = keep;
	/* The snapshot at once, the stop after it: how long stopping the process and counting its
	 * threads takes is no part of the call. Work left running on the device then either lands in
	 * the snapshot's time (charged) or after it (SETTLE's check.async_escape); none is credited. */
	int krc = 0;
	if (rc == KG_SESSION_OK) {
		r->step = "download";
		krc = kg_keeper_end(s->keeper, s->dev_slot, bytes, lo, hi, &t1, &r->copy_ns, e);
	}
	if (rc == KG_SESSION_OK || rc == KG_SESSION_FAILED) {
		int h = hold(s, KG_OP_RUN);
		if (h)
			return h;
	}
	if (rc)
		return rc;
	uint64_t cpu1 = runner_cpu_ns(s);
	if (krc == -ETIMEDOUT) {
		/* the device did not let the keeper copy: work the candidate left running holds it */
		kg_sb_kill(s->sb, KG_SB_END_TIMEOUT);
		return ended(s);
	}
	if (krc)
		return krc;
	r->span_ns = t1 > t0 ? t1 - t0 : 0;
	r->download_ns = r->span_ns > r->parent_ns ? r->span_ns - r->parent_ns : 0;
	/* the snapshot reads and writes the outputs once: at the device's measured copy rate, the
	 * least it can take, whoever else is on the device */
	uint64_t mbps = s->keeper->ceiling_mbps;
	r->snap_ns = mbps ? (uint64_t)((double)(hi - lo) * 2.0 * 1000.0 / (double)mbps) : 0;
	r->ret = rep.rc;
	r->child_ns = rep.elapsed_ns;
	r->tail_ns = rep.info;
	r->l2_flags = rep.flags;
	s->l2_flags |= rep.flags;
	r->cpu_known = cpu0 && cpu1 >= cpu0;
	r->cpu_ns = r->cpu_known ? cpu1 - cpu0 : 0;
	if (getenv("KGATE_DEBUG_TIMING"))
		fprintf(stderr, "[kgate] %s device call: span %.1f us (RUN round trip %.1f, claim %.1f), snapshot %.1f us "
				"(least %.1f), %zu bytes\n",
			s->watched ? "cand" : "ref", (double)r->span_ns / 1e3, (double)r->parent_ns / 1e3,
			(double)r->child_ns / 1e3, (double)r->copy_ns / 1e3, (double)r->snap_ns / 1e3, bytes);
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
	if (!rc && c->flush) {
		r->step = "flush";
		cpu0 = runner_cpu_ns(s);
		rc = kg_session_call(s, KG_OP_FLUSH, 0, NULL, NULL, e);
		cpu1 = runner_cpu_ns(s);
		r->flush_cpu_ns = cpu1 > cpu0 && cpu0 ? cpu1 - cpu0 : 0;
	}
	if (!rc) {
		double keep = s->call_timeout_s;
		r->step = "run";
		if (c->run_timeout_s > 0)
			s->call_timeout_s = c->run_timeout_s;
		cpu0 = runner_cpu_ns(s);
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
		cpu1 = rc ? 0 : runner_cpu_ns(s);
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

static uint64_t median_u64(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
	return v[n / 2];
}

/* The trusted clock's calibration: NOPs, calls that do nothing, flushes; before LOAD, so that no
 * untrusted code can slow them down to widen the allowance it is later measured against. */
static int calibrate(struct kg_session *s, kg_error *e)
{
	uint64_t nop[KG_CAL_N], run[KG_CAL_N], span[KG_CAL_N], cpu[KG_CAL_N], flush[KG_CAL_N];
	int rc = 0;
	for (int i = 0; i < KG_CAL_N && !rc; i++)
		rc = kg_session_call(s, KG_OP_NOP, 0, NULL, &nop[i], e);
	for (int i = 0; i < KG_CAL_N && !rc; i++) {
		struct kg_call_result r;
		rc = kg_session_run_call(s, &(struct kg_call){.flush = i < 3}, &r, e);
		run[i] = r.parent_ns;
		span[i] = r.span_ns;
		cpu[i] = r.cpu_ns;
		flush[i] = r.flush_cpu_ns;
	}
	if (rc)
		return rc;
	s->nop_ns = median_u64(nop, KG_CAL_N);
	s->cal_run_ns = median_u64(run, KG_CAL_N);
	s->cal_span_ns = median_u64(span, KG_CAL_N);
	s->cal_cpu_ns = median_u64(cpu, KG_CAL_N);
	/* the least of the three: a flush slowed by a busy machine during calibration must not make an
	 * honest later one look skipped (a skipped flush costs nearly nothing, far under any of them) */
	s->cal_flush_cpu_ns = flush[0] < flush[1] ? flush[0] : flush[1];
	if (flush[2] < s->cal_flush_cpu_ns)
		s->cal_flush_cpu_ns = flush[2];
	return 0;
}

/* The run sandbox of a runner, kgate-run or a script, from the backend's data: what the two
 * differ in (when the filter applies, threads, sealed opens) the caller sets. */
static struct kg_sb_spec run_spec(const struct kg_session_opts *o, const struct kg_arena *a, const char *const *argv,
				  const char *const *envp, const int *fds, const struct kg_sb_path *paths, int n_paths)
{
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_RUN,
		.name = o->be->sandbox_name,
		.argv = argv,
		.envp = envp,
		.cwd = "/tmp",
		.fds = fds,
		.n_fds = a->fd_in < 0 ? 2 : a->fd_map < 0 ? 3 : 4,
		.paths = paths,
		.n_paths = n_paths,
		.limits = o->limits,
		.required = o->required_layers,
		.disabled = o->disabled_layers,
		.stdin_fd = -1,
		.devices = o->be->devices,
		.proc = o->be->proc,
		.sys_ro = o->be->sys_ro,
		.syscalls = o->be->syscalls,
		.readonly_opens = o->be->readonly_opens,
	};
	spec.limits.address_space_unbounded = o->be->address_space_unbounded;
	return spec;
}

static int hello_and_load(struct kg_session *s, const struct kg_session_opts *o, const char *load_path, kg_error *e);

/* An interpreted runner (torch_runner.py): the Python kg_path_python found runs the script from
 * beside kgate-run on the same fds, under the run profile plus the backend's calls, applied by the
 * sandbox before exec. What it loads is a module's source, shown read-only. */
static int start_script(struct kg_session *s, const struct kg_session_opts *o, kg_error *e)
{
	char py[PATH_MAX], why[160], script[PATH_MAX], prefix[PATH_MAX];
	if (kg_path_python(py, sizeof(py), why, sizeof(why)))
		return kg_err(e, -ENOENT, "%s", why);
	if (kg_path_runner_script(o->be->runner_script, script, sizeof(script)))
		return kg_err(e, -ENOENT, "%s not found beside kgate-run (install kgate, or set KGATE_RUNNER)",
			      o->be->runner_script);
	const char *argv[] = {py, "-I", "-B", script, "--backend", o->be->name, NULL};
	/* USER spares the interpreter a passwd lookup (a socket to nscd) */
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp", "USER=kgate",
					   "OMP_NUM_THREADS=1", NULL};
	struct kg_sb_path paths[3] = {{.host = o->so_path, .inside = "/kgate/lib/problem.py", .flags = 0}};
	int n_paths = 1;
	kg_python_sandbox_paths(py, script, prefix, sizeof(prefix), paths, &n_paths);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	int one = 1;
	setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	struct kg_arena *a = s->arena;
	int fds[4] = {sv[1], a->fd, a->fd_in, a->fd_map};
	struct kg_sb_spec spec = run_spec(o, a, argv, envp, fds, paths, n_paths);
	spec.allow_threads = 1; /* the interpreter's own threads; its filter applies before exec */
	/* importing torch takes seconds on a small machine: HELLO may come late */
	double keep = s->call_timeout_s;
	if (s->call_timeout_s < 120)
		s->call_timeout_s = 120;
	int rc = kg_sb_spawn(&spec, &s->sb, e);
	close(sv[1]);
	if (rc) {
		close(sv[0]);
		s->call_timeout_s = keep;
		return rc;
	}
	s->ctl = sv[0];
	rc = hello_and_load(s, o, "/kgate/lib/problem.py", e);
	s->call_timeout_s = keep;
	return rc;
}

int kg_session_start(struct kg_session *s, const struct kg_session_opts *o, struct kg_arena *a, kg_error *e)
{
	int sv[2] = {-1, -1};
	int rc;
	char runner[PATH_MAX];
	memset(s, 0, sizeof(*s));
	s->ctl = -1;
	s->arena = a;
	s->call_timeout_s = o->call_timeout_s > 0 ? o->call_timeout_s : 60;
	s->host = !o->be->needs_gpu;
	s->threads = o->threads;
	/* a run under a tool (compute-sanitizer) is never timed, and the tool talks to its library in
	 * the runner: that process is not stopped between commands */
	s->watched = o->watched && !o->tool_argv;
	if (!o->tool_argv && !(s->proc = calloc(1, sizeof(*s->proc))))
		return kg_err(e, -ENOMEM, "out of memory");
	if (s->proc)
		s->proc->pidfd = -1;
	/* a tool writes its report and tears down after the runner is gone: give it time */
	s->linger_ms = o->tool_argv ? 60000 : 2000;
	if (o->be->runner_script)
		return start_script(s, o, e);
	if (kg_path_runner(runner, sizeof(runner)))
		return kg_err(e, -ENOENT, "kgate-run not found (set KGATE_RUNNER or install kgate)");
	int n_tool = 0;
	while (o->tool_argv && o->tool_argv[n_tool])
		if (++n_tool > 30)
			return kg_err(e, -E2BIG, "too many tool arguments");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	/* HELLO comes with the runner's pid as the kernel knows it: the key to its CPU-time clock */
	int one = 1;
	setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));

	/* A device arena is the keeper's, exported to the runner in place of the host arena, which
	 * then stays kgate's and the keeper's alone. Under a tool the runner copies exact buffers. */
	int dev_fd = -1;
	size_t dev_bytes = 0;
	char dev_arg[32];
	if (o->be->needs_gpu && !o->tool_argv) {
		if (!o->keeper) {
			close(sv[0]);
			close(sv[1]);
			return kg_err(e, -EINVAL, "a device runner needs kgate-device (the keeper of its arena)");
		}
		if ((rc = kg_keeper_attach(o->keeper, a->fd, a->capacity, &s->dev_slot, &dev_fd, &dev_bytes, e))) {
			close(sv[0]);
			close(sv[1]);
			return rc;
		}
		s->keeper = o->keeper;
		snprintf(dev_arg, sizeof(dev_arg), "%zu", dev_bytes);
	}
	const char *argv[40];
	int ac = 0;
	for (int i = 0; o->tool_argv && o->tool_argv[i]; i++)
		argv[ac++] = o->tool_argv[i];
	argv[ac++] = runner;
	argv[ac++] = "--backend";
	argv[ac++] = o->be->name;
	if (o->tool_argv) {
		argv[ac++] = "--exact-buffers";
		argv[ac++] = "--tool-sockets";
	}
	if (dev_fd >= 0) {
		argv[ac++] = "--device-arena";
		argv[ac++] = dev_arg;
	}
	argv[ac] = NULL;
	/* A sanitizer build's runner: ASan's own fault handler would report through /proc/self/maps,
	 * which the seal ends (a fault named as an open); a fault must end the process as it does in
	 * a production build, from the wait status */
	static const char *const envp_plain[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp",
						 "OMP_NUM_THREADS=1", NULL};
	static const char *const envp_san[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp",
					       "OMP_NUM_THREADS=1", "ASAN_OPTIONS=handle_segv=0:handle_sigbus=0:handle_sigfpe=0",
					       NULL};
	const char *const *envp = getenv("KGATE_SANITIZE") ? envp_san : envp_plain;
	/* fd 5: a paged arena's inputs, a memfd sealed so that the runner can only map it read-only;
	 * fd 6: its page map (runner/wire.h) */
	int fds[4] = {sv[1], dev_fd >= 0 ? dev_fd : a->fd, dev_fd >= 0 ? -1 : a->fd_in, dev_fd >= 0 ? -1 : a->fd_map};
	/* An installed runner lives under /usr, which every profile already shows read-only; a build
	 * tree's runner has to be bound in (at the same path, so argv[0] stays valid). */
	int n_paths = 1;
	struct kg_sb_path paths[3] = {
		{.host = o->so_path, .inside = "/kgate/lib/kernel.so", .flags = KG_SB_PATH_EXEC},
	};
	if (strncmp(runner, "/usr/", 5))
		paths[n_paths++] = (struct kg_sb_path){.host = runner, .inside = NULL, .flags = KG_SB_PATH_EXEC};
	/* A tool outside /usr (CUDA under /opt, say) is shown with its whole directory: it loads its
	 * injection libraries from beside itself. */
	char tool_dir[PATH_MAX];
	if (o->tool_argv && strncmp(o->tool_argv[0], "/usr/", 5)) {
		snprintf(tool_dir, sizeof(tool_dir), "%s", o->tool_argv[0]);
		char *slash = strrchr(tool_dir, '/');
		if (slash && slash != tool_dir)
			*slash = '\0';
		paths[n_paths++] = (struct kg_sb_path){.host = tool_dir, .inside = NULL, .flags = KG_SB_PATH_EXEC};
	}
	struct kg_sb_spec spec = run_spec(o, a, argv, envp, fds, paths, n_paths);
	spec.seccomp_deferred = 1; /* kgate-run applies it itself, after sealing, before LOAD */
	spec.allow_threads = o->threads;
	spec.sealed_opens = o->be->sealed_opens;
	/* the candidate: its filters and its changes to sealed mappings are the supervisor's */
	spec.watched = s->watched;
	rc = kg_sb_spawn(&spec, &s->sb, e);
	close(sv[1]);
	sv[1] = -1;
	if (dev_fd >= 0)
		close(dev_fd);
	if (rc) {
		close(sv[0]);
		return rc;
	}
	s->ctl = sv[0];
	return hello_and_load(s, o, "/kgate/lib/kernel.so", e);
}

/* HELLO (with the runner's pid from the kernel), the clock's calibration, then LOAD of what the
 * sandbox shows at load_path. A watched runner is distrusted before LOAD, and its loader thread
 * must be gone once LOAD is answered. */
static int hello_and_load(struct kg_session *s, const struct kg_session_opts *o, const char *load_path, kg_error *e)
{
	struct kg_wire_reply r;
	int rc = recv_reply_from(s, KG_OP_HELLO, 0, &r, s->call_timeout_s, &s->runner_pid);
	if (rc == KG_SESSION_FAULT) {
		/* nothing untrusted runs before HELLO: a runner that cannot say it is broken */
		snprintf(s->msg, sizeof(s->msg), "%s", s->fault);
		s->fault_code = 0;
		return KG_SESSION_FAILED;
	}
	if (rc)
		return rc;
	int zero = 0;
	setsockopt(s->ctl, SOL_SOCKET, SO_PASSCRED, &zero, sizeof(zero));
	/* a device's ceiling is the keeper's measure, where nothing untrusted runs */
	s->ceiling_mbps = s->keeper ? s->keeper->ceiling_mbps : r.info;
	s->has_cpu_clock = s->runner_pid > 0 && !clock_getcpuclockid(s->runner_pid, &s->cpu_clock);
	if (s->proc) {
		if (s->runner_pid <= 0 || kg_sb_proc_attach(s->proc, s->runner_pid, e)) {
			/* no pid to stop: the process would run between commands; nothing is verified so */
			snprintf(s->msg, sizeof(s->msg), "the runner's process cannot be watched: %s",
				 s->runner_pid <= 0 ? "its pid did not come with HELLO" : e->msg);
			return KG_SESSION_FAILED;
		}
		if (!kg_sb_proc_tasks(s->proc, e) && r.tid)
			s->loader = kg_sb_proc_outer_tid(s->proc, (pid_t)r.tid);
		if (s->watched && r.tid && !s->loader) {
			/* the one thread that must be gone after LOAD could not be told from the others */
			snprintf(s->msg, sizeof(s->msg), "the runner's loader thread (tid %u inside) is not among its threads",
				 r.tid);
			return KG_SESSION_FAILED;
		}
		if ((rc = hold(s, KG_OP_HELLO)))
			return rc;
	}
	/* nobody times a run under a tool */
	if (!o->tool_argv && (rc = calibrate(s, e)))
		return rc;

	struct kg_wire_cmd load;
	memset(&load, 0, sizeof(load));
	load.magic = KG_WIRE_MAGIC;
	load.op = KG_OP_LOAD;
	snprintf(load.path, sizeof(load.path), "%s", load_path);
	if (s->watched && (rc = kg_sb_distrust(s->sb, s->runner_pid, e)))
		return rc;
	if ((rc = resume(s)))
		return rc;
	uint64_t t0;
	rc = exchange(s, &load, 0, &r, &t0, e);
	s->loaded = 1;
	if (rc == KG_SESSION_OK || rc == KG_SESSION_FAILED) {
		int h = hold(s, KG_OP_LOAD);
		if (h)
			return h;
	}
	if (rc)
		return rc;
	s->sealed = r.info == 1;
	return KG_SESSION_OK;
}

void kg_session_close(struct kg_session *s)
{
	if (!s->sb)
		return;
	if (!s->ended) {
		struct kg_wire_cmd q;
		memset(&q, 0, sizeof(q));
		q.magic = KG_WIRE_MAGIC;
		q.op = KG_OP_QUIT;
		q.seq = ++s->seq;
		int quit_sent = resume(s) == KG_SESSION_OK && !s->ended &&
				send(s->ctl, &q, sizeof(q), MSG_NOSIGNAL) == (ssize_t)sizeof(q);
		if (quit_sent) {
			struct kg_wire_reply r;
			if (recv_reply_from(s, KG_OP_QUIT, q.seq, &r, 5.0, NULL) != KG_SESSION_ENDED && !s->ended &&
			    kg_sb_wait_fd(s->sb, -1, s->linger_ms) != KG_SB_ENDED)
				quit_sent = 0;
		}
		/* A runner that lingers after QUIT is killed, not waited on. */
		if (!quit_sent && !s->ended)
			kg_sb_kill(s->sb, KG_SB_END_KILLED);
		ended(s);
	}
	if (s->ctl >= 0)
		close(s->ctl);
	s->ctl = -1;
	if (s->proc)
		kg_sb_proc_detach(s->proc);
}

void kg_session_free(struct kg_session *s)
{
	kg_session_close(s);
	kg_sb_free(s->sb);
	s->sb = NULL;
	free(s->proc);
	s->proc = NULL;
}
