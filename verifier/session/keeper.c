/* kgate's side of the keeper protocol (device/wire.h): spawning kgate-device, one command at a
 * time under a lock (a reference's call may run on a thread beside the candidate's checks), every
 * reply awaited with a deadline scaled to the bytes it moves. */
#include "verifier/session/keeper.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "device/wire.h"

static int wait_reply(struct kg_keeper *k, uint32_t op, uint64_t seq, struct kg_dev_reply *r, int *fd, double timeout_s,
		      kg_error *e)
{
	uint64_t t0 = kg_now_ns(), deadline = t0 + (uint64_t)(timeout_s * 1e9);
	/* A timed call's START and END are answered within its span: waited for by polling, for a
	 * while, so that no wake-up of this thread's lands in the span and its jitter with it */
	uint64_t spin = op == KG_DEV_START || op == KG_DEV_END ? t0 + KG_SPIN_NS : 0;
	for (;;) {
		uint64_t now = kg_now_ns();
		if (now >= deadline)
			return kg_err(e, -ETIMEDOUT, "kgate-device gave no answer to %s within %.0f s", kg_dev_op_name(op),
				      timeout_s);
		struct pollfd p = {.fd = k->ctl, .events = POLLIN};
		int pr = poll(&p, 1, now < spin ? 0 : (int)((deadline - now) / 1000000u) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			k->dead = 1;
			return kg_err(e, -errno, "waiting for kgate-device: %s", strerror(errno));
		}
		if (pr == 0)
			continue;
		int got = -1;
		ssize_t n = kg_recv_fd(k->ctl, r, sizeof(*r), &got);
		if (n == 0 || (n < 0 && n != -2)) {
			k->dead = 1;
			return kg_err(e, -EPIPE, "kgate-device ended while kgate waited for %s", kg_dev_op_name(op));
		}
		if (n != (ssize_t)sizeof(*r) || r->magic != KG_DEV_MAGIC) {
			if (got >= 0)
				close(got);
			k->dead = 1;
			return kg_err(e, -EPROTO, "kgate-device sent a malformed reply");
		}
		/* a late answer to a command given up on: dropped */
		if (r->op != op || r->seq != seq) {
			if (got >= 0)
				close(got);
			continue;
		}
		if (fd)
			*fd = got;
		else if (got >= 0)
			close(got);
		r->msg[sizeof(r->msg) - 1] = '\0';
		if (r->status)
			return kg_err(e, r->status < 0 ? r->status : -EIO, "kgate-device: %s", r->msg);
		return 0;
	}
}

static int command(struct kg_keeper *k, struct kg_dev_cmd *c, int pass_fd, struct kg_dev_reply *r, int *fd,
		   kg_error *e)
{
	if (k->dead || k->ctl < 0)
		return kg_err(e, -EPIPE, "kgate-device is not running");
	/* copies of the whole arena at >= 1 GB/s, twice (START: up; END: snapshot and down) */
	double timeout_s = 30.0 + 2.0 * (double)c->bytes / 1e9 + c->delay_ms / 1000.0;
	pthread_mutex_lock(&k->mu);
	c->magic = KG_DEV_MAGIC;
	c->seq = ++k->seq;
	ssize_t n = kg_send_fd(k->ctl, c, sizeof(*c), pass_fd);
	int rc = n == (ssize_t)sizeof(*c) ? wait_reply(k, c->op, c->seq, r, fd, timeout_s, e)
					  : kg_err(e, -EPIPE, "sending %s to kgate-device: %s", kg_dev_op_name(c->op),
						   strerror(errno));
	pthread_mutex_unlock(&k->mu);
	return rc;
}

int kg_keeper_start(struct kg_keeper *k, const char *path, kg_error *e)
{
	memset(k, 0, sizeof(*k));
	k->ctl = -1;
	pthread_mutex_init(&k->mu, NULL);
	k->up = 1;
	if (access(path, X_OK))
		return kg_err(e, -ENOENT, "kgate-device at %s is not executable", path);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	/* dup2 onto fd 3 clears close-on-exec there; nothing else of kgate's is inherited */
	posix_spawn_file_actions_adddup2(&fa, sv[1], KG_DEV_CTL_FD);
	char *argv[] = {(char *)path, NULL};
	/* the runners' environment: the same device 0 of the same visible ones, no JIT cache written */
	/* CUDA_DEVICE_MAX_CONNECTIONS: a stream of its own hardware queue each (a gated call's steps
	 * wait on the device, and must not wait in front of the keeper's other streams' work) */
	char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "CUDA_CACHE_DISABLE=1", "CUDA_DEVICE_MAX_CONNECTIONS=32",
			NULL, NULL};
	/* the GPUs kgate was given (one worker per GPU), as its runners see them */
	char cvd[160];
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	if (vis && strlen(vis) < 120) {
		snprintf(cvd, sizeof(cvd), "CUDA_VISIBLE_DEVICES=%s", vis);
		envp[5] = cvd;
	}
	int rc = posix_spawn(&k->pid, path, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(sv[1]);
	if (rc) {
		close(sv[0]);
		k->pid = 0;
		return kg_err(e, -rc, "starting kgate-device: %s", strerror(rc));
	}
	k->ctl = sv[0];
	struct kg_dev_reply r;
	/* a context, a 512 MB copy measured six times */
	if ((rc = wait_reply(k, KG_DEV_HELLO, 0, &r, NULL, 60.0, e))) {
		kg_keeper_stop(k);
		return rc;
	}
	k->ceiling_mbps = r.ceiling_mbps;
	k->l2_bytes = r.l2_bytes;
	k->flush_bytes = r.flush_bytes;
	k->granularity = r.granularity;
	k->caps = r.caps;
	k->mem_bytes = r.mem_bytes;
	k->mem_free = r.mem_free;
	k->quiet_flush_ns = r.flush_ns;
	return 0;
}

int kg_keeper_attach(struct kg_keeper *k, int host_fd, size_t bytes, uint32_t sets, uint64_t stride, int *slot,
		     int *dev_fd, size_t *dev_bytes, kg_error *e)
{
	struct kg_dev_cmd c = {.op = KG_DEV_ATTACH, .bytes = bytes, .sets = sets, .stride = stride};
	struct kg_dev_reply r;
	*dev_fd = -1;
	int rc = command(k, &c, host_fd, &r, dev_fd, e);
	if (rc)
		return rc;
	if (*dev_fd < 0)
		return kg_err(e, -EPROTO, "kgate-device attached an arena but passed no device fd");
	*slot = (int)r.slot;
	*dev_bytes = r.dev_bytes;
	return 0;
}

int kg_keeper_export(struct kg_keeper *k, int slot, int *dev_fd, size_t *dev_bytes, kg_error *e)
{
	struct kg_dev_cmd c = {.op = KG_DEV_EXPORT, .slot = (uint32_t)slot};
	struct kg_dev_reply r;
	*dev_fd = -1;
	int rc = command(k, &c, -1, &r, dev_fd, e);
	if (rc)
		return rc;
	if (*dev_fd < 0)
		return kg_err(e, -EPROTO, "kgate-device exported an arena but passed no device fd");
	*dev_bytes = r.dev_bytes;
	return 0;
}

void kg_keeper_start_cmd(int slot, size_t bytes, int flush, const struct kg_keeper_stage *st, struct kg_dev_cmd *c)
{
	*c = (struct kg_dev_cmd){.op = KG_DEV_START, .slot = (uint32_t)slot, .bytes = bytes, .flush = flush != 0};
	if (st && st->n > 0 && st->n <= KG_DEV_MAX_RANGES) {
		c->n_ranges = (uint32_t)st->n;
		c->src_slot = (uint32_t)st->src_slot;
		memcpy(c->key, st->key, sizeof(c->key));
		memcpy(c->range, st->range, (size_t)st->n * sizeof(st->range[0]));
	}
	if (st && st->sets > 1) {
		c->sets = st->sets;
		c->stride = st->stride;
	}
	if (st && st->gate) {
		c->gate = 1;
		c->out_lo = st->out_lo;
		c->out_hi = st->out_hi;
		c->probe_ns = st->probe_ns;
		memcpy(c->probe_off, st->probe_off, sizeof(c->probe_off));
		memcpy(c->probe_bytes, st->probe_bytes, sizeof(c->probe_bytes));
	}
}

int kg_keeper_begin(struct kg_keeper *k, int slot, size_t bytes, int flush, const struct kg_keeper_stage *st,
		    struct kg_keeper_begun *out, kg_error *e)
{
	struct kg_dev_cmd c;
	memset(out, 0, sizeof(*out));
	if (st && st->n > KG_DEV_MAX_RANGES)
		return kg_err(e, -EINVAL, "%d staging ranges (at most %d)", st->n, KG_DEV_MAX_RANGES);
	if (slot < 0 || slot >= KG_DEV_MAX_SLOTS)
		return kg_err(e, -EINVAL, "no keeper slot %d", slot);
	kg_keeper_start_cmd(slot, bytes, flush, st, &c);
	k->sets[slot] = c.sets > 1 ? c.sets : 1;
	k->stride[slot] = c.stride;
	struct kg_dev_reply r;
	int rc = command(k, &c, -1, &r, NULL, e);
	if (!rc) {
		out->t0 = r.t_ns;
		out->tok = r.gate_tok;
		out->mem_free = r.mem_free;
	}
	return rc;
}

int kg_keeper_gate(struct kg_keeper *k, int slot, int page_fd, kg_error *e)
{
	struct kg_dev_cmd c = {.op = KG_DEV_GATE, .slot = (uint32_t)slot};
	struct kg_dev_reply r;
	if (!(k->caps & KG_DEV_CAP_GATE))
		return kg_err(e, -ENOTSUP, "kgate-device has no gated calls on this device");
	return command(k, &c, page_fd, &r, NULL, e);
}

int kg_keeper_meminfo(struct kg_keeper *k, uint64_t *mem_free, kg_error *e)
{
	struct kg_dev_cmd c = {.op = KG_DEV_MEMINFO};
	struct kg_dev_reply r;
	int rc = command(k, &c, -1, &r, NULL, e);
	*mem_free = rc ? 0 : r.mem_free;
	return rc;
}

int kg_keeper_end(struct kg_keeper *k, int slot, size_t bytes, uint64_t out_lo, uint64_t out_hi, uint64_t in_hi,
		  int keep, struct kg_keeper_ended *out, kg_error *e)
{
	struct kg_dev_cmd c = {.op = KG_DEV_END, .slot = (uint32_t)slot, .bytes = bytes, .out_lo = out_lo,
			       .out_hi = out_hi, .in_hi = in_hi, .keep = keep != 0};
	if (slot >= 0 && slot < KG_DEV_MAX_SLOTS && k->sets[slot] > 1) {
		c.sets = k->sets[slot];
		c.stride = k->stride[slot];
		c.keep = 1;
		c.in_hi = 0;
	}
	struct kg_dev_reply r;
	int rc = command(k, &c, -1, &r, NULL, e);
	memset(out, 0, sizeof(*out));
	out->in_state = KG_DEV_IN_UNCHECKED;
	if (!rc) {
		out->t_ns = r.t_ns;
		out->copy_ns = r.copy_ns;
		out->dev_ns = r.dev_ns;
		out->in_state = r.in_state;
		out->in_diff = r.in_diff;
		out->gate = r.gate;
		out->gate_set = r.gate_set;
		out->flush_ns = r.flush_ns;
		out->flush_max_ns = r.flush_max_ns;
		out->probe_state = r.probe_state;
		out->probe_diff = r.probe_diff;
		out->mem_free = r.mem_free;
	}
	return rc;
}

int kg_keeper_settle(struct kg_keeper *k, int slot, size_t bytes, uint32_t delay_ms, uint64_t in_hi,
		     uint32_t *in_state, kg_error *e)
{
	struct kg_dev_cmd c = {
		.op = KG_DEV_SETTLE, .slot = (uint32_t)slot, .bytes = bytes, .delay_ms = delay_ms, .in_hi = in_hi};
	struct kg_dev_reply r;
	int rc = command(k, &c, -1, &r, NULL, e);
	*in_state = rc ? KG_DEV_IN_UNCHECKED : r.in_state;
	return rc;
}

int kg_keeper_check(struct kg_keeper *k, int slot, int src_slot, const struct kg_dev_check *chk, int n,
		    struct kg_dev_cmp *out, kg_error *e)
{
	if (n < 0 || n > KG_DEV_MAX_CHECKS)
		return kg_err(e, -EINVAL, "%d checks (at most %d)", n, KG_DEV_MAX_CHECKS);
	struct kg_dev_cmd c = {.op = KG_DEV_CHECK, .slot = (uint32_t)slot, .src_slot = (uint32_t)src_slot,
			       .n_checks = (uint32_t)n};
	memcpy(c.check, chk, (size_t)n * sizeof(*chk));
	struct kg_dev_reply r;
	int rc = command(k, &c, -1, &r, NULL, e);
	if (!rc)
		memcpy(out, r.cmp, (size_t)n * sizeof(*out));
	return rc;
}

int kg_keeper_fetch(struct kg_keeper *k, int slot, size_t bytes, uint64_t lo, uint64_t hi, kg_error *e)
{
	return kg_keeper_fetch_set(k, slot, bytes, lo, hi, 0, e);
}

int kg_keeper_fetch_set(struct kg_keeper *k, int slot, size_t bytes, uint64_t lo, uint64_t hi, uint32_t set,
			kg_error *e)
{
	struct kg_dev_cmd c = {
		.op = KG_DEV_FETCH, .slot = (uint32_t)slot, .bytes = bytes, .out_lo = lo, .out_hi = hi, .sets = set};
	struct kg_dev_reply r;
	return command(k, &c, -1, &r, NULL, e);
}

int kg_keeper_look(struct kg_keeper *k, int slot, size_t bytes, uint32_t delay_ms, uint32_t *in_state, uint64_t *diff,
		   kg_error *e)
{
	struct kg_dev_cmd c = {.op = KG_DEV_SETTLE, .slot = (uint32_t)slot, .bytes = bytes, .delay_ms = delay_ms, .look = 1};
	if (slot >= 0 && slot < KG_DEV_MAX_SLOTS && k->sets[slot] > 1) {
		c.sets = k->sets[slot];
		c.stride = k->stride[slot];
	}
	struct kg_dev_reply r;
	int rc = command(k, &c, -1, &r, NULL, e);
	*in_state = rc ? KG_DEV_IN_UNCHECKED : r.in_state;
	*diff = rc ? 0 : r.in_diff;
	return rc;
}

void kg_keeper_stop(struct kg_keeper *k)
{
	if (!k->up)
		return;
	if (k->ctl >= 0 && !k->dead) {
		struct kg_dev_cmd c = {.op = KG_DEV_QUIT};
		struct kg_dev_reply r;
		kg_error e = {0};
		/* a short wait: QUIT moves nothing */
		c.magic = KG_DEV_MAGIC;
		c.seq = ++k->seq;
		if (send(k->ctl, &c, sizeof(c), MSG_NOSIGNAL) == (ssize_t)sizeof(c))
			wait_reply(k, KG_DEV_QUIT, c.seq, &r, NULL, 5.0, &e);
	}
	if (k->ctl >= 0)
		close(k->ctl);
	k->ctl = -1;
	if (k->pid > 0) {
		/* closing the socket ends it; a keeper stuck in the driver is killed */
		int st;
		for (int i = 0; i < 50 && waitpid(k->pid, &st, WNOHANG) == 0; i++)
			usleep(20000);
		if (waitpid(k->pid, &st, WNOHANG) == 0) {
			kill(k->pid, SIGKILL);
			while (waitpid(k->pid, &st, 0) < 0 && errno == EINTR)
				;
		}
	}
	k->pid = 0;
	k->up = 0;
	pthread_mutex_destroy(&k->mu);
}
