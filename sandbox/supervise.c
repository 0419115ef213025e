/* Supervising a running child from the parent: its output, the seccomp notifications of its
 * denied calls, the watchdog, and killing the whole tree. All of it runs only inside the caller's
 * kg_sb_wait_fd or kg_sb_wait (and spawn's wait for setup), never on a thread of its own. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sb_int.h"

#define MiB (1024ull * 1024)

void sb_kill_tree(struct kg_sb_child *c)
{
	if (c->pid <= 0 || c->reaped)
		return;
	sb_cgroup_kill(&c->cg);
	/* the pid-ns init: its death takes every process of the namespace along */
	if (c->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	else
		kill(c->pid, SIGKILL);
	/* the process group (the child called setsid): what runs without a pid namespace. The
	 * leader is not reaped yet, so the id cannot have been recycled. */
	kill(-c->pid, SIGKILL);
}

void sb_set_why(struct kg_sb_child *c, enum kg_sb_end why, const char *fmt, ...)
{
	if (c->why != KG_SB_END_RUNNING || c->exited)
		return;
	c->why = why;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why_detail, sizeof(c->why_detail), fmt, ap);
	va_end(ap);
}

void kg_sb_kill(struct kg_sb_child *c, enum kg_sb_end why)
{
	if (!c || c->exited || c->reaped)
		return;
	if (why == KG_SB_END_TIMEOUT)
		sb_set_why(c, why, "the caller's deadline passed");
	else
		sb_set_why(c, KG_SB_END_KILLED, "killed by the caller");
	c->killed = 1;
	sb_kill_tree(c);
}

void sb_drain_output(struct kg_sb_child *c)
{
	/* bounded per call so that a flooding child cannot starve the caller's fd and timers */
	for (uint64_t budget = 64 * MiB; c->out_r >= 0 && budget;) {
		ssize_t n;
		if (c->out_len < c->keep) {
			n = read(c->out_r, c->out + c->out_len, c->keep - c->out_len);
			if (n > 0)
				c->out_len += (size_t)n;
		} else {
			/* past what we keep: move the bytes to /dev/null inside the kernel */
			n = splice(c->out_r, NULL, c->devnull_w, NULL, 1 << 20, SPLICE_F_NONBLOCK);
			if (n < 0 && errno == EINVAL) {
				char sink[65536];
				n = read(c->out_r, sink, sizeof(sink));
			}
		}
		if (n == 0) {
			sb_close_fd(&c->out_r);
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				sb_close_fd(&c->out_r);
			break;
		}
		c->out_total += (uint64_t)n;
		budget = budget > (uint64_t)n ? budget - (uint64_t)n : 0;
		if (c->out_total > c->plan.lim.output_max && !c->killed) {
			sb_set_why(c, KG_SB_END_OUTPUT_LIMIT, "printed more than %" PRIu64 " bytes",
				(uint64_t)c->plan.lim.output_max);
			c->killed = 1;
			sb_kill_tree(c);
		}
	}
	c->out[c->out_len] = '\0';
}

static void recv_listeners(struct kg_sb_child *c)
{
	while (c->notify_p >= 0) {
		int fd = sb_recv_fd(c->notify_p);
		if (fd == -EAGAIN || fd == -EINTR)
			return;
		if (fd == -EPIPE) {
			sb_close_fd(&c->notify_p);
			return;
		}
		if (fd < 0)
			continue; /* a message without an fd: ignore it */
		if (c->n_listeners == SB_MAX_LISTENERS) {
			close(fd);
			continue;
		}
		c->listeners[c->n_listeners++] = fd;
		c->had_listener = 1;
	}
}

void sb_drop_listener(struct kg_sb_child *c, int i)
{
	close(c->listeners[i]);
	memmove(&c->listeners[i], &c->listeners[i + 1],
		(size_t)(c->n_listeners - i - 1) * sizeof(c->listeners[0]));
	c->n_listeners--;
}

static void record_denial(struct kg_sb_child *c, const struct seccomp_notif *req)
{
	const struct seccomp_data *d = &req->data;
	char *name = seccomp_syscall_resolve_num_arch(d->arch, d->nr);
	const char *nm = name ? name : "";
	char filter[sizeof(c->name) + 40];
	/* a deferred program loaded the same description itself (KG_SB_ENV_FILTER) */
	snprintf(filter, sizeof(filter), "the %s filter%s", c->name, c->plan.deferred ? " the program applied" : "");
	if (c->why == KG_SB_END_RUNNING && !c->exited) {
		c->why_nr = d->nr;
		snprintf(c->why_syscall, sizeof(c->why_syscall), "%s", nm);
		if (!strcmp(nm, "mmap") || !strcmp(nm, "mremap")) {
			unsigned long long len = !strcmp(nm, "mmap") ? d->args[1] : d->args[2];
			sb_set_why(c, KG_SB_END_MEMORY, "%s of %llu bytes over the limit %" PRIu64 " of %s", nm, len,
				   (uint64_t)c->plan.lim.mem_bytes, filter);
		} else {
			sb_set_why(c, KG_SB_END_SYSCALL,
				"%s(%#llx, %#llx, %#llx, %#llx, %#llx, %#llx) denied by %s (pid %u)",
				name ? name : "?", (unsigned long long)d->args[0], (unsigned long long)d->args[1],
				(unsigned long long)d->args[2], (unsigned long long)d->args[3],
				(unsigned long long)d->args[4], (unsigned long long)d->args[5], filter, req->pid);
		}
	}
	free(name);
}

/* Only builds made with `make SANDBOX_LEARN=1` honour the variable: a production binary never
 * lets a denied call through, whatever its environment says. */
static int learn_mode(void)
{
#ifdef KG_SANDBOX_LEARN
	const char *v = getenv("KGATE_SB_LEARN");
	return v && *v && strcmp(v, "0");
#else
	return 0;
#endif
}

static void learn_note(const char *name, int nr)
{
	static char seen[4096];
	char key[64];
	snprintf(key, sizeof(key), ",%s,", name);
	if (strstr(seen, key))
		return;
	size_t len = strlen(seen);
	snprintf(seen + len, sizeof(seen) - len, "%s%s,", len ? "" : ",", name);
	fprintf(stderr, "kgate-sandbox: learn: %s (%d)\n", name, nr);
}

static void respond(int fd, struct seccomp_notif_resp *resp, uint64_t id, int error, int cont)
{
	memset(resp, 0, sizeof(*resp));
	resp->id = id;
	resp->error = error;
	resp->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
	seccomp_notify_respond(fd, resp);
}

static int overlaps_sealed(const struct kg_sb_child *c, uint64_t addr, uint64_t len, struct kg_sb_range *hit)
{
	uint64_t lo = addr & ~(uint64_t)4095, hi = addr + (len ? len : 1);
	if (hi < addr)
		hi = UINT64_MAX; /* a wrapped range covers everything above addr */
	for (int i = 0; i < c->n_sealed; i++)
		if (lo < c->sealed[i].hi && hi > c->sealed[i].lo) {
			*hit = c->sealed[i];
			return 1;
		}
	return 0;
}

static int madvise_destructive(int advice)
{
	switch (advice) {
	case MADV_DONTNEED:
	case MADV_FREE:
	case MADV_REMOVE:
	case MADV_DONTFORK:
	case MADV_WIPEONFORK:
	case MADV_HWPOISON:
	case 24: /* MADV_DONTNEED_LOCKED */
	case 101: /* MADV_SOFT_OFFLINE */
		return 1;
	default:
		return 0;
	}
}

/* A watched program's memory-map change or filter (its profile routes them here): let through, or
 * refused and named once the caller distrusts it. Returns 0 for a call this does not handle (a
 * mapping over the memory bound, which is a plain denial). The arguments are registers, not
 * pointers into the program's memory, so what is checked is what runs. */
static int service_watched(struct kg_sb_child *c, int fd, const struct seccomp_notif *req)
{
	const struct seccomp_data *d = &req->data;
	uint64_t mem = c->plan.lim.mem_bytes && !c->plan.sanitize ? c->plan.lim.mem_bytes : UINT64_MAX;
	uint64_t a = 0, len = 0, a2 = 0, len2 = 0;
	int two = 0;
	const char *nm;
	switch (d->nr) {
	case SYS_mmap:
		if (d->args[1] > mem || !(d->args[3] & MAP_FIXED))
			return 0;
		nm = "mmap(MAP_FIXED)", a = d->args[0], len = d->args[1];
		break;
	case SYS_mremap:
		if (d->args[2] > mem)
			return 0;
		nm = "mremap", a = d->args[0], len = d->args[1];
		if (d->args[3] & MREMAP_FIXED)
			two = 1, a2 = d->args[4], len2 = d->args[2];
		break;
	case SYS_munmap:
		nm = "munmap", a = d->args[0], len = d->args[1];
		break;
	case SYS_mprotect:
		nm = "mprotect", a = d->args[0], len = d->args[1];
		break;
	case SYS_madvise:
		/* hints (WILLNEED, SEQUENTIAL, HUGEPAGE, ...) change nothing a sealed range holds: an
		 * honest kernel may give them; advice that discards contents or changes the mapping is
		 * the attempt */
		if (!madvise_destructive((int)d->args[2])) {
			respond(fd, c->resp, req->id, 0, 1);
			return 1;
		}
		nm = "madvise", a = d->args[0], len = d->args[1];
		break;
	case SYS_seccomp:
		if (!c->distrusted) {
			respond(fd, c->resp, req->id, 0, 1);
			return 1;
		}
		sb_set_why(c, KG_SB_END_TAMPER,
			   "seccomp(%llu, %#llx, ...) after it was distrusted: a filter stacked on its own threads "
			   "(pid %u)",
			   (unsigned long long)d->args[0], (unsigned long long)d->args[1], req->pid);
		goto tamper;
	default:
		return 0;
	}
	struct kg_sb_range hit;
	if (!c->distrusted || (!overlaps_sealed(c, a, len, &hit) && !(two && overlaps_sealed(c, a2, len2, &hit)))) {
		respond(fd, c->resp, req->id, 0, 1);
		return 1;
	}
	sb_set_why(c, KG_SB_END_TAMPER, "%s(%#llx, %#llx, %#llx) over its sealed range %#llx..%#llx (pid %u)", nm,
		   (unsigned long long)d->args[0], (unsigned long long)d->args[1], (unsigned long long)d->args[2],
		   (unsigned long long)hit.lo, (unsigned long long)hit.hi, req->pid);
tamper:
	/* kill first, as for a denial: the attempt is the finding, and the call never returns */
	c->killed = 1;
	sb_kill_tree(c);
	respond(fd, c->resp, req->id, -EPERM, 0);
	return 1;
}

/* A shared mmap within the bound (the filters route MAP_SHARED here wherever memory is bounded):
 * the memory it makes is charged before it runs (memory.c), and a watched program's MAP_FIXED one
 * is checked against its sealed ranges too. Returns 0 for any other call. */
static int service_shared_mmap(struct kg_sb_child *c, int fd, const struct seccomp_notif *req)
{
	const struct seccomp_data *d = &req->data;
	uint64_t mem = c->plan.lim.mem_bytes && !c->plan.sanitize ? c->plan.lim.mem_bytes : UINT64_MAX;
	if (d->nr != SYS_mmap || !(d->args[3] & MAP_SHARED) || d->args[1] > mem)
		return 0;
	if (sb_mem_shared_mmap(c, (pid_t)req->pid, d->args[1], d->args[3], (int)d->args[4])) {
		/* over the bound: ended already, and the call never returns */
		respond(fd, c->resp, req->id, -ENOMEM, 0);
		return 1;
	}
	if (c->watched && (d->args[3] & MAP_FIXED) && service_watched(c, fd, req))
		return 1;
	respond(fd, c->resp, req->id, 0, 1);
	return 1;
}

int kg_sb_distrust(struct kg_sb_child *c, pid_t pid, kg_error *e)
{
	if (!c->watched)
		return 0;
	int n = kg_sb_sealed_ranges(pid, c->sealed, SB_MAX_SEALED, e);
	/* no mseal on this host: what the program would have sealed is guarded here alone */
	if (n == 0 && !(c->active & KG_SB_LAYER_MSEAL))
		n = kg_sb_image_ranges(pid, c->sealed, SB_MAX_SEALED, e);
	if (n < 0)
		return n;
	c->n_sealed = n;
	c->distrusted = 1;
	return 0;
}

static void service_listener(struct kg_sb_child *c, int i)
{
	if (!c->req && seccomp_notify_alloc(&c->req, &c->resp)) {
		c->req = NULL;
		sb_drop_listener(c, i);
		return;
	}
	int fd = c->listeners[i];
	memset(c->req, 0, sizeof(*c->req));
	int rc = seccomp_notify_receive(fd, c->req);
	if (rc) {
		/* the caller died before we read it: transient; anything else: not a listener */
		if (rc != -ENOENT && rc != -EINTR)
			sb_drop_listener(c, i);
		return;
	}
	if (learn_mode()) {
		/* Development aid for measuring what a profile must allow (the CUDA driver after
		 * initialisation, say): every call the filter would deny is let through and named on
		 * stderr, once per name. Never set it in production. */
		char *name = seccomp_syscall_resolve_num_arch(c->req->data.arch, c->req->data.nr);
		learn_note(name ? name : "?", c->req->data.nr);
		free(name);
		memset(c->resp, 0, sizeof(*c->resp));
		c->resp->id = c->req->id;
		c->resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		seccomp_notify_respond(fd, c->resp);
		return;
	}
	if (service_shared_mmap(c, fd, c->req))
		return;
	if (c->watched && service_watched(c, fd, c->req))
		return;
	record_denial(c, c->req);
	/* kill first: the call never returns to the program, whatever we answer */
	c->killed = 1;
	sb_kill_tree(c);
	memset(c->resp, 0, sizeof(*c->resp));
	c->resp->id = c->req->id;
	c->resp->error = -EPERM;
	seccomp_notify_respond(fd, c->resp);
}

/* One round of poll over the caller's fd (may be -1), our fds and extra (the setup pipe). Returns
 * the poll revents of fd and extra through the pointers; < 0 on poll errors. */
int sb_poll_once(struct kg_sb_child *c, int fd, int extra, int timeout_ms, short *fd_ev,
		     short *extra_ev, short *exit_ev)
{
	struct pollfd pf[5 + SB_MAX_LISTENERS];
	int n = 0, i_fd = -1, i_extra = -1, i_out = -1, i_notify = -1, i_pid = -1, i_l = -1;
	if (fd >= 0)
		pf[i_fd = n++] = (struct pollfd){.fd = fd, .events = POLLIN};
	if (extra >= 0)
		pf[i_extra = n++] = (struct pollfd){.fd = extra, .events = POLLIN};
	if (c->out_r >= 0)
		pf[i_out = n++] = (struct pollfd){.fd = c->out_r, .events = POLLIN};
	if (c->notify_p >= 0)
		pf[i_notify = n++] = (struct pollfd){.fd = c->notify_p, .events = POLLIN};
	if (c->pidfd >= 0 && !c->exited)
		pf[i_pid = n++] = (struct pollfd){.fd = c->pidfd, .events = POLLIN};
	i_l = n;
	int nl = c->n_listeners;
	for (int i = 0; i < nl; i++)
		pf[n++] = (struct pollfd){.fd = c->listeners[i], .events = POLLIN};
	int r = poll(pf, (nfds_t)n, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (i_out >= 0 && pf[i_out].revents)
		sb_drain_output(c);
	if (i_notify >= 0 && pf[i_notify].revents)
		recv_listeners(c);
	/* backwards: dropping one shifts those after it */
	for (int i = nl - 1; i >= 0; i--) {
		short ev = pf[i_l + i].revents;
		if (ev & POLLIN)
			service_listener(c, i);
		else if (ev & (POLLHUP | POLLERR | POLLNVAL))
			sb_drop_listener(c, i);
	}
	*fd_ev = i_fd >= 0 ? pf[i_fd].revents : 0;
	*extra_ev = i_extra >= 0 ? pf[i_extra].revents : 0;
	*exit_ev = i_pid >= 0 ? pf[i_pid].revents : 0;
	return r;
}

static void on_exit_seen(struct kg_sb_child *c)
{
	c->exited = 1;
	c->end_ns = kg_now_ns();
	/* anything that slipped out of the pid namespace's reach (no pid ns: the process group) */
	sb_kill_tree(c);
	sb_drain_output(c);
}

int sb_ms_until(uint64_t now, uint64_t t)
{
	if (t <= now)
		return 0;
	uint64_t ms = (t - now + 999999) / 1000000;
	return ms > 3600000 ? 3600000 : (int)ms;
}

static void watchdog(struct kg_sb_child *c, uint64_t now)
{
	if (c->killed || c->exited || now < c->deadline_ns)
		return;
	sb_set_why(c, KG_SB_END_TIMEOUT, "wall-clock limit of %g s reached", c->plan.lim.wall_s);
	c->killed = 1;
	sb_kill_tree(c);
}

int kg_sb_wait_fd(struct kg_sb_child *c, int fd, int timeout_ms)
{
	uint64_t start = kg_now_ns();
	uint64_t until = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000;
	for (;;) {
		uint64_t now = kg_now_ns();
		watchdog(c, now);
		uint64_t sample = sb_mem_due_ns(c);
		if (now >= sample)
			sb_mem_sample(c, 0);
		sample = sb_mem_due_ns(c);
		int ms = -1;
		if (!c->exited) {
			if (!c->killed)
				ms = sb_ms_until(now, c->deadline_ns);
			if (until != UINT64_MAX && (ms < 0 || sb_ms_until(now, until) < ms))
				ms = sb_ms_until(now, until);
			if (sample != UINT64_MAX && (ms < 0 || sb_ms_until(now, sample) < ms))
				ms = sb_ms_until(now, sample);
		} else {
			ms = 0;
		}
		short fd_ev = 0, extra_ev = 0, exit_ev = 0;
		int r = sb_poll_once(c, fd, -1, ms, &fd_ev, &extra_ev, &exit_ev);
		if (r < 0)
			return r;
		if (fd_ev)
			return 1;
		if (exit_ev)
			on_exit_seen(c);
		if (c->exited)
			return KG_SB_ENDED;
		if (kg_now_ns() >= until)
			return 0;
	}
}

