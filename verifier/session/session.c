/* Parent side of the runner protocol: the one-reply exchange of commands, stopping and resuming the
 * runner's process around each, per-command deadlines, and turning every way the runner can end
 * into a structured outcome. Starting a runner is session_start.c; a call of the hosted .so and the
 * clock's calibration are session_call.c.
 *
 * The runner's process is a black box once the .so is loaded. So: it runs only while a command is
 * outstanding (the parent stops it with SIGSTOP as soon as the reply is in, and resumes it right
 * before the next command): nothing in it computes between commands, and its memory holds still
 * while the parent reads the outputs. A host backend's call is timed from before the parent writes
 * the call's inputs (they are not readable earlier) to the moment the process is stopped, in the CPU
 * time the kernel charged it. Every command has a deadline scaled to its work. Exactly one
 * well-formed reply per command: anything else on the channel (a second or early message, a wrong
 * op or sequence number, a torn record) is the candidate's fault, named and ended at once. */
#include "verifier/session/session_int.h"

#include "verifier/session/keeper.h"

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

int kg_sess_ended(struct kg_session *s)
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
int kg_sess_recv_reply(struct kg_session *s, uint32_t op, uint64_t seq, struct kg_wire_reply *r,
			   double timeout_s, pid_t *pid)
{
	uint64_t t0 = kg_now_ns(), deadline = t0 + (uint64_t)(timeout_s * 1e9);
	/* an ungated device call's RUN ends inside the keeper's span: its reply polled for, for a while
	 * (wire.h's KG_SPIN_NS); a host backend's process needs the CPU itself, and a gated call's
	 * span ends at its stream's mark on the device */
	uint64_t spin = s->keeper && !s->gated && op == KG_OP_RUN ? t0 + KG_SPIN_NS : 0;
	for (;;) {
		uint64_t now = kg_now_ns();
		if (now >= deadline) {
			kg_sb_kill(s->sb, KG_SB_END_TIMEOUT);
			return kg_sess_ended(s);
		}
		int ms = now < spin ? 0 : (int)((deadline - now + 999999) / 1000000);
		int w = kg_sb_wait_fd(s->sb, s->ctl, ms);
		if (w == KG_SB_ENDED)
			return kg_sess_ended(s);
		if (w <= 0)
			continue;
		ssize_t n = recv_record(s->ctl, r, pid);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return kg_sess_ended(s); /* EOF: the runner is gone, or closed its end */
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
uint64_t kg_sess_cpu_ns(const struct kg_session *s)
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
int kg_sess_resume(struct kg_session *s)
{
	if (!s->proc || !s->proc->stopped)
		return KG_SESSION_OK;
	int rc = channel_quiet(s, "while it was stopped");
	if (rc)
		return rc;
	kg_error e = {0};
	if (kg_sb_proc_cont(s->proc, &e))
		return kg_sess_ended(s);
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
int kg_sess_hold(struct kg_session *s, uint32_t op)
{
	if (!s->proc)
		return KG_SESSION_OK;
	kg_error e = {0};
	int rc = kg_sb_proc_stop(s->proc, STOP_TIMEOUT_MS, &e);
	if (rc == -ESRCH)
		return kg_sess_ended(s);
	if (rc)
		return fault(s, KG_R_SANDBOX_TIMEOUT, "%s", e.msg);
	/* held still: its memory counted as it is (the sandbox's own count, where no cgroup bounds it) */
	if (kg_sb_check_memory(s->sb) == KG_SB_ENDED)
		return kg_sess_ended(s);
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
	case KG_OP_SETTLE:
		return base + arg / 1000.0;
	case KG_OP_RUN:
		return s->call_timeout_s; /* the caller's, from the reference's time */
	default:
		return base;
	}
}

void kg_sess_fill_cmd(const struct kg_session *s, struct kg_wire_cmd *cmd, enum kg_wire_op op, uint32_t arg)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->magic = KG_WIRE_MAGIC;
	cmd->op = op;
	cmd->delay_ms = op == KG_OP_SETTLE ? arg : 0;
	cmd->entry = op == KG_OP_RUN ? arg : 0;
	cmd->arena_size = s->arena->used;
	/* the tensors themselves are in the tables the runner got at start (kg_arena_tables_seal) */
	cmd->n_in = (uint32_t)s->arena->n_in;
	cmd->n_out = (uint32_t)s->arena->n_out;
	cmd->table = (uint32_t)s->arena->table;
	if (op == KG_OP_SETUP)
		snprintf(cmd->path, sizeof(cmd->path), "%s", s->arena->dims);
}

/* Sends cmd (the process resumed already) and waits for its one reply; t_sent gets the moment it
 * left. With a probe (c, host RUNs), the process is stopped once mid-call for it. */
int kg_sess_exchange_probed(struct kg_session *s, struct kg_wire_cmd *cmd, uint32_t arg, struct kg_wire_reply *r,
			   uint64_t *t_sent, const struct kg_call *c, int *probed, kg_error *e)
{
	cmd->seq = ++s->seq;
	*t_sent = kg_now_ns();
	ssize_t n = send(s->ctl, cmd, sizeof(*cmd), MSG_NOSIGNAL);
	if (n != (ssize_t)sizeof(*cmd)) {
		if (n < 0 && errno != EPIPE && errno != ECONNRESET)
			return kg_err(e, -errno, "sending to the runner: %s", strerror(errno));
		return kg_sess_ended(s);
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
			return kg_sess_ended(s);
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
				return kg_sess_ended(s);
			if (rc)
				return fault(s, KG_R_SANDBOX_TIMEOUT, "%s", pe.msg);
			if (kg_sb_check_memory(s->sb) == KG_SB_ENDED)
				return kg_sess_ended(s);
			c->probe(c->probe_arg);
			*probed = 1;
			if (kg_sb_proc_cont(s->proc, &pe))
				return kg_sess_ended(s);
		}
		limit -= (double)(kg_now_ns() - *t_sent) / 1e9;
	}
	return kg_sess_recv_reply(s, cmd->op, cmd->seq, r, limit > 0.001 ? limit : 0.001, NULL);
}

int kg_sess_exchange(struct kg_session *s, struct kg_wire_cmd *cmd, uint32_t arg, struct kg_wire_reply *r,
		    uint64_t *t_sent, kg_error *e)
{
	return kg_sess_exchange_probed(s, cmd, arg, r, t_sent, NULL, NULL, e);
}

int kg_session_kill_held(struct kg_session *s)
{
	if (!s->ended)
		kg_sb_kill(s->sb, KG_SB_END_TIMEOUT);
	return kg_sess_ended(s);
}

int kg_session_look(struct kg_session *s, uint32_t delay_ms, uint64_t *diff_off, kg_error *e)
{
	if (s->fault_code)
		return KG_SESSION_FAULT;
	if (s->ended)
		return KG_SESSION_ENDED;
	if (!s->keeper || !s->loaded || !(s->keeper->caps & KG_DEV_CAP_CMP))
		return kg_err(e, -ENOTSUP, "no device comparison here");
	uint32_t st = KG_DEV_IN_UNCHECKED;
	int krc = kg_keeper_look(s->keeper, s->dev_slot, s->arena->used, delay_ms, &st, diff_off, e);
	if (krc == -ETIMEDOUT && s->watched)
		return kg_session_kill_held(s); /* as in a call: the device is held */
	if (krc)
		return krc;
	if (st == KG_DEV_IN_SAME)
		return 0;
	if (st == KG_DEV_IN_DIFFERS)
		return 1;
	return kg_err(e, -EPROTO, "kgate-device did not compare the arena");
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
		uint32_t ins = KG_DEV_IN_UNCHECKED;
		int krc = kg_keeper_settle(s->keeper, s->dev_slot, s->arena->used, arg, kg_sess_in_hi(s), &ins, e);
		/* what END found changed stays changed: the host arena keeps END's copy of it */
		s->inputs_same = s->inputs_same && !krc && ins == KG_DEV_IN_SAME;
		if (parent_ns)
			*parent_ns = kg_now_ns() - t;
		if (krc == -ETIMEDOUT && s->watched)
			return kg_session_kill_held(s); /* as in a call: the device is held */
		return krc;
	}
	int rc = kg_sess_resume(s);
	if (rc)
		return rc;
	kg_sess_fill_cmd(s, &cmd, op, arg);
	uint64_t t0;
	rc = kg_sess_exchange(s, &cmd, arg, r, &t0, e);
	if (parent_ns)
		*parent_ns = kg_now_ns() - t0;
	/* a failed command is answered too: the process holds still after it all the same */
	if (rc == KG_SESSION_OK || rc == KG_SESSION_FAILED) {
		int h = kg_sess_hold(s, op);
		if (h)
			return h;
	}
	return rc;
}

int kg_session_setup(struct kg_session *s, kg_error *e)
{
	return kg_session_call(s, KG_OP_SETUP, 0, NULL, NULL, e);
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
		int quit_sent = kg_sess_resume(s) == KG_SESSION_OK && !s->ended &&
				send(s->ctl, &q, sizeof(q), MSG_NOSIGNAL) == (ssize_t)sizeof(q);
		if (quit_sent) {
			struct kg_wire_reply r;
			if (kg_sess_recv_reply(s, KG_OP_QUIT, q.seq, &r, 5.0, NULL) != KG_SESSION_ENDED && !s->ended &&
			    kg_sb_wait_fd(s->sb, -1, s->linger_ms) != KG_SB_ENDED)
				quit_sent = 0;
		}
		/* A runner that lingers after QUIT is killed, not waited on. */
		if (!quit_sent && !s->ended)
			kg_sb_kill(s->sb, KG_SB_END_KILLED);
		kg_sess_ended(s);
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

uint64_t kg_sess_in_hi(const struct kg_session *s)
{
	uint64_t lo, hi, end = 0;
	if (!s->keeper || !s->loaded || !(s->keeper->caps & KG_DEV_CAP_CMP))
		return 0;
	kg_arena_out_span(s->arena, &lo, &hi);
	for (int i = 0; i < s->arena->n_in; i++)
		if (s->arena->slot[i].off + s->arena->slot[i].bytes > end)
			end = s->arena->slot[i].off + s->arena->slot[i].bytes;
	return hi > lo && end <= lo ? lo : 0;
}
