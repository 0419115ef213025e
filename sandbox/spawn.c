/* The parent's side of a sandboxed child: plan and clone it, write its uid maps, hand it the seccomp
 * filter, wait for its setup report, then supervise it (output, seccomp notifications, watchdog,
 * exit through a pidfd) and turn its end into an outcome with a stable reason. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb_int.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

struct kg_sb_child {
	struct sb_plan plan;
	pid_t pid;
	int pidfd, err_r, out_r, notify_p, status_r, devnull_w;
	/* our copies of the child's ends; the plan gets the numbers at clone time and is shared
	 * with the child (CLONE_VM), so it is never written to afterwards */
	struct {
		int err_w, sync_r, out_w, notify_c, status_w, bpf_fd, stdin_fd;
	} ce;
	int listeners[SB_MAX_LISTENERS];
	int n_listeners;
	struct sb_cgroup cg;
	int pidns_init;
	uint64_t start_ns, deadline_ns, end_ns;
	unsigned active, failed;
	char notes[1024];
	int exited, reaped, killed;
	int status; /* wait status of the program (or of its init when we killed that) */
	/* the first reason we decided on (a denial, the watchdog, the output bound, the caller) */
	enum kg_sb_end why;
	int why_nr;
	char why_syscall[48];
	char why_detail[512];
	char *out;
	size_t out_len, keep;
	uint64_t out_total;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	char env_notify[40], env_nfds[40];
	struct kg_sb_outcome oc;
};

static void unmap_exec_gate(struct sb_plan *p);

static int sanitize_mode(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 1;
#else
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
	return 1;
#endif
#endif
	const char *s = getenv("KGATE_SANITIZE");
	return s && *s && strcmp(s, "0");
#endif
}

static void notes_add(struct kg_sb_child *c, const char *s)
{
	size_t len = strlen(c->notes);
	snprintf(c->notes + len, sizeof(c->notes) - len, "%s%s", len ? "; " : "", s);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void resolve_limits(struct kg_sb_limits *l, const struct kg_sb_spec *s)
{
	*l = s->limits;
	if (!(l->wall_s > 0))
		l->wall_s = 60;
	if (l->wall_s > 1e6) /* a deadline in nanoseconds must not overflow */
		l->wall_s = 1e6;
	if (!l->cpu_s)
		l->cpu_s = (uint32_t)ceil(l->wall_s) + 1;
	if (!l->mem_bytes && s->profile != KG_SB_PROFILE_RUN_CUDA)
		l->mem_bytes = 8 * GiB;
	if (!l->nproc)
		l->nproc = s->profile == KG_SB_PROFILE_COMPILE ? 256
			   : s->profile == KG_SB_PROFILE_RUN_CUDA ? 128
			   : s->allow_threads ? 64 : 1;
	if (!l->nofile)
		l->nofile = 64;
	if (!l->fsize)
		l->fsize = 64 * MiB;
	if (!l->tmpfs_bytes)
		l->tmpfs_bytes = 64 * MiB;
	if (!l->output_keep)
		l->output_keep = 64 * 1024;
	if (!l->output_max)
		l->output_max = 64 * MiB;
}

/* ---- killing and recording why ---- */

static void kill_tree(struct kg_sb_child *c)
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

static void set_why(struct kg_sb_child *c, enum kg_sb_end why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_why(struct kg_sb_child *c, enum kg_sb_end why, const char *fmt, ...)
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
		set_why(c, why, "the caller's deadline passed");
	else
		set_why(c, KG_SB_END_KILLED, "killed by the caller");
	c->killed = 1;
	kill_tree(c);
}

/* ---- servicing the sandbox's own fds ---- */

static void drain_output(struct kg_sb_child *c)
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
			close_fd(&c->out_r);
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				close_fd(&c->out_r);
			break;
		}
		c->out_total += (uint64_t)n;
		budget = budget > (uint64_t)n ? budget - (uint64_t)n : 0;
		if (c->out_total > c->plan.lim.output_max && !c->killed) {
			set_why(c, KG_SB_END_OUTPUT_LIMIT, "printed more than %" PRIu64 " bytes",
				(uint64_t)c->plan.lim.output_max);
			c->killed = 1;
			kill_tree(c);
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
			close_fd(&c->notify_p);
			return;
		}
		if (fd < 0)
			continue; /* a message without an fd: ignore it */
		if (c->n_listeners == SB_MAX_LISTENERS) {
			close(fd);
			continue;
		}
		c->listeners[c->n_listeners++] = fd;
	}
}

static void drop_listener(struct kg_sb_child *c, int i)
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
	char filter[64];
	if (c->plan.deferred)
		snprintf(filter, sizeof(filter), "the program's own filter");
	else
		snprintf(filter, sizeof(filter), "the %s filter", kg_sb_profile_name(c->plan.profile));
	if (c->why == KG_SB_END_RUNNING && !c->exited) {
		c->why_nr = d->nr;
		snprintf(c->why_syscall, sizeof(c->why_syscall), "%s", nm);
		if (!strcmp(nm, "mmap") || !strcmp(nm, "mremap")) {
			unsigned long long len = !strcmp(nm, "mmap") ? d->args[1] : d->args[2];
			if (c->plan.deferred) /* the bound is the one the program passed */
				set_why(c, KG_SB_END_MEMORY, "%s of %llu bytes over the limit of %s", nm, len, filter);
			else
				set_why(c, KG_SB_END_MEMORY, "%s of %llu bytes over the limit %" PRIu64, nm, len,
					(uint64_t)c->plan.lim.mem_bytes);
		} else {
			set_why(c, KG_SB_END_SYSCALL,
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

static void service_listener(struct kg_sb_child *c, int i)
{
	if (!c->req && seccomp_notify_alloc(&c->req, &c->resp)) {
		c->req = NULL;
		drop_listener(c, i);
		return;
	}
	int fd = c->listeners[i];
	memset(c->req, 0, sizeof(*c->req));
	int rc = seccomp_notify_receive(fd, c->req);
	if (rc) {
		/* the caller died before we read it: transient; anything else: not a listener */
		if (rc != -ENOENT && rc != -EINTR)
			drop_listener(c, i);
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
	record_denial(c, c->req);
	/* kill first: the call never returns to the program, whatever we answer */
	c->killed = 1;
	kill_tree(c);
	memset(c->resp, 0, sizeof(*c->resp));
	c->resp->id = c->req->id;
	c->resp->error = -EPERM;
	seccomp_notify_respond(fd, c->resp);
}

/* One round of poll over the caller's fd (may be -1), our fds and extra (the setup pipe). Returns
 * the poll revents of fd and extra through the pointers; < 0 on poll errors. */
static int poll_once(struct kg_sb_child *c, int fd, int extra, int timeout_ms, short *fd_ev,
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
		drain_output(c);
	if (i_notify >= 0 && pf[i_notify].revents)
		recv_listeners(c);
	/* backwards: dropping one shifts those after it */
	for (int i = nl - 1; i >= 0; i--) {
		short ev = pf[i_l + i].revents;
		if (ev & POLLIN)
			service_listener(c, i);
		else if (ev & (POLLHUP | POLLERR | POLLNVAL))
			drop_listener(c, i);
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
	kill_tree(c);
	drain_output(c);
}

static int ms_until(uint64_t now, uint64_t t)
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
	set_why(c, KG_SB_END_TIMEOUT, "wall-clock limit of %g s reached", c->plan.lim.wall_s);
	c->killed = 1;
	kill_tree(c);
}

int kg_sb_wait_fd(struct kg_sb_child *c, int fd, int timeout_ms)
{
	uint64_t start = kg_now_ns();
	uint64_t until = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000;
	for (;;) {
		uint64_t now = kg_now_ns();
		watchdog(c, now);
		int ms = -1;
		if (!c->exited) {
			if (!c->killed)
				ms = ms_until(now, c->deadline_ns);
			if (until != UINT64_MAX && (ms < 0 || ms_until(now, until) < ms))
				ms = ms_until(now, until);
		} else {
			ms = 0;
		}
		short fd_ev = 0, extra_ev = 0, exit_ev = 0;
		int r = poll_once(c, fd, -1, ms, &fd_ev, &extra_ev, &exit_ev);
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

/* ---- the end ---- */

static void classify(struct kg_sb_child *c, int status, const struct rusage *ru)
{
	struct kg_sb_outcome *o = &c->oc;
	o->syscall_nr = -1;
	o->end = c->why;
	if (c->why != KG_SB_END_RUNNING) {
		o->syscall_nr = c->why == KG_SB_END_SYSCALL || c->why == KG_SB_END_MEMORY ? c->why_nr : -1;
		if (o->syscall_nr >= 0)
			snprintf(o->syscall, sizeof(o->syscall), "%s", c->why_syscall);
		snprintf(o->detail, sizeof(o->detail), "%s", c->why_detail);
		return;
	}
	long ooms = sb_cgroup_oom_kills(&c->cg);
	double cpu = (double)ru->ru_utime.tv_sec + (double)ru->ru_stime.tv_sec +
		     ((double)ru->ru_utime.tv_usec + (double)ru->ru_stime.tv_usec) / 1e6;
	if (ooms > 0) {
		o->end = KG_SB_END_MEMORY;
		snprintf(o->detail, sizeof(o->detail), "cgroup memory.max of %" PRIu64 " bytes reached (%ld oom kills)",
			 (uint64_t)c->plan.lim.mem_bytes, ooms);
	} else if (WIFEXITED(status)) {
		o->end = KG_SB_END_EXIT;
		o->exit_code = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		if (sig == SIGSYS) {
			o->end = KG_SB_END_SYSCALL;
			snprintf(o->detail, sizeof(o->detail), "killed by SIGSYS (seccomp, call not known)");
		} else if (sig == SIGXCPU || (sig == SIGKILL && cpu >= c->plan.lim.cpu_s)) {
			o->end = KG_SB_END_TIMEOUT;
			snprintf(o->detail, sizeof(o->detail), "CPU time limit of %u s exceeded", c->plan.lim.cpu_s);
		} else {
			o->end = KG_SB_END_SIGNAL;
			o->signo = sig;
			sb_signame(sig, o->detail, sizeof(o->detail));
		}
	}
}

static void reap(struct kg_sb_child *c)
{
	int status = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	while (wait4(c->pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			status = W_EXITCODE(0, SIGKILL);
			break;
		}
	}
	c->reaped = 1;
	c->status = status;
	if (!c->end_ns)
		c->end_ns = kg_now_ns();
	if (c->pidns_init && c->status_r >= 0) {
		/* The program's own status and usage, as its init saw them; absent when we killed
		 * init. Init's own rusage would be useless anyway: it shares our memory. */
		struct sb_exit ex;
		if (read(c->status_r, &ex, sizeof(ex)) == (ssize_t)sizeof(ex)) {
			c->status = status = ex.status;
			ru = ex.ru;
		} else {
			ru.ru_maxrss = 0;
		}
	}
	memset(&c->oc, 0, sizeof(c->oc));
	classify(c, status, &ru);
	sb_cgroup_destroy(&c->cg);
	drain_output(c);
	c->oc.layers_active = c->active;
	c->oc.layers_failed = c->failed;
	c->oc.output = c->out;
	c->oc.output_len = c->out_len;
	c->oc.output_total = c->out_total;
	c->oc.wall_s = (double)(c->end_ns - c->start_ns) / 1e9;
	c->oc.maxrss_kb = ru.ru_maxrss;
}

int kg_sb_wait(struct kg_sb_child *c, struct kg_sb_outcome *o)
{
	if (!c)
		return -EINVAL;
	while (!c->reaped && !c->exited) {
		int r = kg_sb_wait_fd(c, -1, -1);
		if (r < 0 && r != -EINTR) {
			/* poll itself failed: do not leave the child running unsupervised */
			c->killed = 1;
			kill_tree(c);
			break;
		}
	}
	if (!c->reaped)
		reap(c);
	if (o)
		*o = c->oc;
	return 0;
}

pid_t kg_sb_pid(const struct kg_sb_child *c)
{
	return c ? c->pid : -1;
}

unsigned kg_sb_layers_active(const struct kg_sb_child *c)
{
	return c ? c->active : 0;
}

const char *kg_sb_notes(const struct kg_sb_child *c)
{
	return c ? c->notes : "";
}

void kg_sb_free(struct kg_sb_child *c)
{
	if (!c)
		return;
	if (c->pid > 0 && !c->reaped) {
		if (!c->exited) {
			c->killed = 1;
			set_why(c, KG_SB_END_KILLED, "freed while running");
			kill_tree(c);
		}
		kg_sb_wait(c, NULL);
	}
	sb_cgroup_destroy(&c->cg);
	close_fd(&c->pidfd);
	close_fd(&c->err_r);
	close_fd(&c->out_r);
	close_fd(&c->notify_p);
	close_fd(&c->status_r);
	close_fd(&c->devnull_w);
	while (c->n_listeners)
		drop_listener(c, c->n_listeners - 1);
	struct sb_plan *p = &c->plan;
	int *plan_fds[] = {&c->ce.err_w, &c->ce.sync_r, &c->ce.out_w, &c->ce.notify_c, &c->ce.status_w,
		&c->ce.bpf_fd, &c->ce.stdin_fd};
	for (size_t i = 0; i < KG_ARRAY_LEN(plan_fds); i++)
		close_fd(plan_fds[i]);
	sb_mounts_free(p);
	free(p->envp);
	if (p->nocaps)
		cap_free(p->nocaps);
	unmap_exec_gate(p);
	if (p->initcaps)
		cap_free(p->initcaps);
	if (p->stacks)
		munmap(p->stacks, 2 * (p->stack_sz + 4096));
	if (c->req)
		seccomp_notify_free(c->req, c->resp);
	free(c->out);
	free(c);
}

/* ---- spawning ---- */

static int build_env(struct kg_sb_child *c, const struct kg_sb_spec *s, kg_error *e)
{
	size_t n = 0;
	while (s->envp && s->envp[n])
		n++;
	char **env = calloc(n + 3, sizeof(*env));
	if (!env)
		return kg_err(e, -ENOMEM, "sandbox: out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(s->envp[i], "KGATE_SB_", 9))
			env[k++] = (char *)s->envp[i];
	if (s->seccomp_deferred) {
		snprintf(c->env_notify, sizeof(c->env_notify), "%s=%d", KG_SB_ENV_NOTIFY_FD, SB_SLOT_NOTIFY(s->n_fds));
		snprintf(c->env_nfds, sizeof(c->env_nfds), "%s=%d", KG_SB_ENV_NFDS, s->n_fds);
		env[k++] = c->env_notify;
		env[k++] = c->env_nfds;
	}
	c->plan.envp = env;
	return 0;
}

static int write_proc(pid_t pid, const char *file, const char *val)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, val, strlen(val));
	int rc = n == (ssize_t)strlen(val) ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

static int write_id_maps(struct kg_sb_child *c, kg_error *e)
{
	char map[64];
	int rc;
	/* an unprivileged parent may map only itself, and only after giving up setgroups */
	if (!c->plan.host_root && (rc = write_proc(c->pid, "setgroups", "deny")))
		return kg_err(e, rc, "sandbox: writing setgroups: %s", strerror(-rc));
	snprintf(map, sizeof(map), "0 %u 1\n", c->plan.host_root ? SB_OUTER_ID : (unsigned)geteuid());
	if ((rc = write_proc(c->pid, "uid_map", map)))
		return kg_err(e, rc, "sandbox: writing uid_map: %s", strerror(-rc));
	snprintf(map, sizeof(map), "0 %u 1\n", c->plan.host_root ? SB_OUTER_ID : (unsigned)getegid());
	if ((rc = write_proc(c->pid, "gid_map", map)))
		return kg_err(e, rc, "sandbox: writing gid_map: %s", strerror(-rc));
	return 0;
}

#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize_address))
#endif
static int child_entry(void *arg)
{
	sb_child_main(arg);
}

/* posix_spawn's trick: the child shares our memory (nothing copied) and runs on its own stack.
 * Sanitizer builds copy instead: their runtime keeps per-thread state that must not be shared. */
static pid_t clone_child(struct kg_sb_child *c, int nsflags, int *pidfd)
{
	int vm = c->plan.sanitize ? 0 : CLONE_VM;
	return clone(child_entry, (char *)c->plan.stack1 + c->plan.stack_sz,
		     nsflags | vm | CLONE_PIDFD | SIGCHLD, &c->plan, pidfd);
}

/* Brings up the user and pid namespaces, dropping what the kernel refuses. Returns the pid (0 in
 * the child) and leaves the namespaces that came up in c->active. */
static pid_t clone_with_layers(struct kg_sb_child *c, int *err)
{
	const unsigned want = ~c->plan.disabled & (KG_SB_LAYER_USERNS | KG_SB_LAYER_PIDNS);
	static const unsigned tries[] = {KG_SB_LAYER_USERNS | KG_SB_LAYER_PIDNS, KG_SB_LAYER_PIDNS,
		KG_SB_LAYER_USERNS, 0};
	*err = 0;
	for (size_t i = 0; i < KG_ARRAY_LEN(tries); i++) {
		unsigned layers = tries[i];
		if ((layers & want) != layers)
			continue;
		int flags = ((layers & KG_SB_LAYER_USERNS) ? CLONE_NEWUSER : 0) |
			    ((layers & KG_SB_LAYER_PIDNS) ? CLONE_NEWPID : 0);
		c->pidfd = -1;
		pid_t pid = clone_child(c, flags, &c->pidfd);
		if (pid >= 0) {
			c->active |= layers;
			c->failed |= want & ~layers;
			return pid;
		}
		if (!*err)
			*err = errno;
		/* EINVAL, EPERM, ENOSPC, EUSERS: a namespace refused; anything else is final */
		if (errno != EINVAL && errno != EPERM && errno != ENOSPC && errno != EUSERS)
			return -1;
	}
	return -1;
}

/* The run profiles allow exactly one execve: of the program, with its path at this address. The
 * page is ours (the child shares or copies it); after its execve the program's fresh address space
 * has nothing there, and it cannot learn where "there" is, so it cannot forge a second execve. A
 * random place in [1 TiB, 64 TiB) first; ASLR's choice if that area is taken (sanitizer shadow,
 * the CUDA driver's reservations). */
static int map_exec_gate(struct sb_plan *p, kg_error *e)
{
	size_t len = strlen(p->exec_path) + 1;
	if (len > 4096)
		return kg_err(e, -ENAMETOOLONG, "sandbox: %s: path too long", p->exec_path);
	void *page = MAP_FAILED;
	for (int i = 0; i < 16 && page == MAP_FAILED; i++) {
		uint64_t r = 0;
		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			r = kg_hash64(&r, sizeof(r), kg_now_ns() + (uint64_t)i);
		void *want = (void *)(uintptr_t)(((1ull << 40) + r % ((1ull << 46) - (1ull << 40))) & ~4095ull);
		page = mmap(want, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			    -1, 0);
		if (page != MAP_FAILED && page != want) { /* kernels without FIXED_NOREPLACE */
			munmap(page, 4096);
			page = MAP_FAILED;
		}
	}
	if (page == MAP_FAILED)
		page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return kg_err(e, -errno, "sandbox: mmap: %s", strerror(errno));
	memcpy(page, p->exec_path, len);
	mprotect(page, 4096, PROT_READ);
	p->exec_gate = (uint64_t)(uintptr_t)page;
	return 0;
}

static void unmap_exec_gate(struct sb_plan *p)
{
	if (p->exec_gate)
		munmap((void *)(uintptr_t)p->exec_gate, 4096);
	p->exec_gate = 0;
}

static int build_filter(struct kg_sb_child *c, const struct kg_sb_spec *s, struct sb_sync *sy, kg_error *e)
{
	scmp_filter_ctx ctx = NULL;
	int rc;
	sy->notify = sb_notify_supported();
	if (s->seccomp_deferred) {
		rc = sb_filter_baseline(sy->notify, &ctx, e);
		sy->notify = 0; /* the listener is for the profile kg_sb_seccomp_apply loads */
	} else {
		struct sb_filter_params fp = {
			.profile = s->profile,
			.allow_threads = s->allow_threads,
			/* ASan reserves terabytes of shadow at startup, under the filter here */
			.mem_bytes = c->plan.sanitize ? 0 : c->plan.lim.mem_bytes,
			.fd_limit = SB_SLOT_NOTIFY(s->n_fds) + 1,
			.self_pid = (c->active & KG_SB_LAYER_PIDNS) ? 2 : c->pid,
			.exec_gate = c->plan.exec_gate,
			.notify = sy->notify,
		};
		rc = sb_filter_profile(&fp, &ctx, e);
	}
	if (!rc)
		rc = sb_filter_export(ctx, c->ce.bpf_fd, &sy->bpf_len, e);
	if (ctx)
		seccomp_release(ctx);
	return rc;
}

static int setup_error(struct kg_sb_child *c, const struct sb_msg *m, int status, kg_error *e)
{
	if (m && m->kind == SB_MSG_FAIL) {
		if (m->layer)
			return kg_err(e, -EPERM, "sandbox: required layer %s failed: %s", m->what,
				      strerror(m->err));
		return kg_err(e, m->err ? -m->err : -EIO, "sandbox: %s %s: %s", m->step, m->what,
			      strerror(m->err));
	}
	if (c->why != KG_SB_END_RUNNING)
		return kg_err(e, -EIO, "sandbox: the child died during setup: %s", c->why_detail);
	char sig[32];
	if (WIFSIGNALED(status))
		return kg_err(e, -EIO, "sandbox: the child died during setup (%s)",
			      sb_signame(WTERMSIG(status), sig, sizeof(sig)));
	return kg_err(e, -EIO, "sandbox: the child died during setup (exit %d)", WEXITSTATUS(status));
}

/* Reads the child's setup messages until EOF on the error pipe: EOF after a report means the
 * program is running, a FAIL message that setup failed. */
static int await_setup(struct kg_sb_child *c, kg_error *e)
{
	struct sb_msg m, fail;
	int got_report = 0, got_fail = 0;
	size_t have = 0;
	memset(&fail, 0, sizeof(fail));
	while (c->err_r >= 0) {
		uint64_t now = kg_now_ns();
		if (now >= c->deadline_ns && !c->killed) {
			set_why(c, KG_SB_END_TIMEOUT, "setup took longer than the wall-clock limit");
			c->killed = 1;
			kill_tree(c);
		}
		short fd_ev, err_ev, exit_ev;
		int r = poll_once(c, -1, c->err_r, c->killed ? 1000 : ms_until(now, c->deadline_ns), &fd_ev,
				  &err_ev, &exit_ev);
		if (r < 0)
			return kg_err(e, r, "sandbox: poll: %s", strerror(-r));
		if (!err_ev)
			continue;
		ssize_t n = read(c->err_r, (char *)&m + have, sizeof(m) - have);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			close_fd(&c->err_r);
			break;
		}
		have += (size_t)n;
		if (have < sizeof(m))
			continue;
		have = 0;
		if (m.kind == SB_MSG_REPORT) {
			got_report = 1;
			c->active |= m.active;
			c->failed |= m.failed;
			if (m.notes[0])
				notes_add(c, m.notes);
		} else if (m.kind == SB_MSG_FAIL && !got_fail) {
			got_fail = 1;
			fail = m;
		}
	}
	if (got_report && !got_fail)
		return 0;
	c->killed = 1;
	kill_tree(c);
	c->exited = 1;
	reap(c);
	return setup_error(c, got_fail ? &fail : NULL, c->status, e);
}

int kg_sb_spawn(const struct kg_sb_spec *s, struct kg_sb_child **out, kg_error *e)
{
	int rc = 0;
	if (out)
		*out = NULL;
	if (!s || !out || !s->argv || !s->argv[0] || s->argv[0][0] != '/')
		return kg_err(e, -EINVAL, "sandbox: argv[0] must be an absolute path");
	if (s->n_fds < 0 || s->n_fds > SB_MAX_FDS || (s->n_fds && !s->fds) || s->n_paths < 0 ||
	    (s->n_paths && !s->paths) || (unsigned)s->profile > KG_SB_PROFILE_RUN_CUDA)
		return kg_err(e, -EINVAL, "sandbox: invalid spec");
	for (int i = 0; i < s->n_fds; i++)
		if (fcntl(s->fds[i], F_GETFD) < 0)
			return kg_err(e, -EBADF, "sandbox: handed fd %d is not open", s->fds[i]);
	if (s->required & s->disabled) {
		char names[256];
		return kg_err(e, -EPERM, "sandbox: required layer %s is disabled",
			      kg_sb_layers_str(s->required & s->disabled, names, sizeof(names)));
	}

	struct kg_sb_child *c = calloc(1, sizeof(*c));
	if (!c)
		return kg_err(e, -ENOMEM, "sandbox: out of memory");
	struct sb_plan *p = &c->plan;
	c->pid = -1;
	int *fds[] = {&c->pidfd, &c->err_r, &c->out_r, &c->notify_p, &c->status_r, &c->devnull_w,
		&c->ce.err_w, &c->ce.sync_r, &c->ce.out_w, &c->ce.notify_c, &c->ce.status_w, &c->ce.bpf_fd,
		&c->ce.stdin_fd};
	for (size_t i = 0; i < KG_ARRAY_LEN(fds); i++)
		*fds[i] = -1;
	int sync_w = -1, masked = 0;
	sigset_t all, old;

	p->profile = s->profile;
	p->required = s->required;
	p->disabled = s->disabled;
	p->deferred = !!s->seccomp_deferred;
	p->allow_threads = !!s->allow_threads;
	p->sanitize = sanitize_mode();
	p->host_root = geteuid() == 0;
	p->parent_pid = getpid();
	resolve_limits(&p->lim, s);
	p->exec_path = s->argv[0];
	p->argv = (char *const *)s->argv;
	p->cwd = s->cwd ? s->cwd : "/tmp";
	p->n_fds = s->n_fds;
	if (s->n_fds)
		memcpy(p->fds, s->fds, (size_t)s->n_fds * sizeof(int));
	c->keep = p->lim.output_keep;
	if (!(c->out = malloc(c->keep + 1))) {
		rc = kg_err(e, -ENOMEM, "sandbox: out of memory");
		goto fail;
	}
	c->out[0] = '\0';
	if ((rc = sb_mounts_plan(p, s, e)) || (rc = build_env(c, s, e)))
		goto fail;
	/* Stacks for the clone and for pid 2, each above a guard page. They stay mapped until the
	 * child is reaped: with CLONE_VM, init runs on its stack for the sandbox's whole life. */
	p->stack_sz = 256 * 1024;
	size_t span = 2 * (p->stack_sz + 4096);
	p->stacks = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (p->stacks == MAP_FAILED) {
		p->stacks = NULL;
		rc = kg_err(e, -errno, "sandbox: mmap: %s", strerror(errno));
		goto fail;
	}
	p->stack1 = (char *)p->stacks + 4096;
	p->stack2 = (char *)p->stack1 + p->stack_sz + 4096;
	mprotect(p->stacks, 4096, PROT_NONE);
	mprotect((char *)p->stack1 + p->stack_sz, 4096, PROT_NONE);
	/* init's marker: harmless on its own (setting timers that wake the machine), but absent
	 * from pid 2's set, which makes every ptrace-mode access from the sandbox to init fail */
	static const cap_value_t marker[] = {CAP_WAKE_ALARM};
	if (!(p->nocaps = cap_init()) || !(p->initcaps = cap_init()) ||
	    cap_set_flag(p->initcaps, CAP_PERMITTED, 1, marker, CAP_SET)) {
		rc = kg_err(e, -ENOMEM, "sandbox: cap_init: %s", strerror(errno));
		goto fail;
	}

	int pe[2], ps[2], po[2], pst[2] = {-1, -1}, sp[2];
	if (pipe2(pe, O_CLOEXEC)) {
		rc = kg_err(e, -errno, "sandbox: pipe: %s", strerror(errno));
		goto fail;
	}
	c->err_r = pe[0], c->ce.err_w = pe[1];
	/* a socket, not a pipe: a child that died early must not SIGPIPE the caller */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ps)) {
		rc = kg_err(e, -errno, "sandbox: socketpair: %s", strerror(errno));
		goto fail;
	}
	c->ce.sync_r = ps[0], sync_w = ps[1];
	if (pipe2(po, O_CLOEXEC | O_NONBLOCK)) {
		rc = kg_err(e, -errno, "sandbox: pipe: %s", strerror(errno));
		goto fail;
	}
	c->out_r = po[0], c->ce.out_w = po[1];
	/* the child's end must block: a program expects a blocking stdout */
	fcntl(c->ce.out_w, F_SETFL, 0);
	fcntl(c->out_r, F_SETPIPE_SZ, 1 << 20);
	if (!(p->disabled & KG_SB_LAYER_PIDNS)) {
		if (pipe2(pst, O_CLOEXEC)) {
			rc = kg_err(e, -errno, "sandbox: pipe: %s", strerror(errno));
			goto fail;
		}
		c->status_r = pst[0], c->ce.status_w = pst[1];
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		rc = kg_err(e, -errno, "sandbox: socketpair: %s", strerror(errno));
		goto fail;
	}
	c->notify_p = sp[0], c->ce.notify_c = sp[1];
	fcntl(c->notify_p, F_SETFL, O_NONBLOCK);
	if ((c->ce.bpf_fd = memfd_create("kgate-seccomp", MFD_CLOEXEC)) < 0 ||
	    (c->devnull_w = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		rc = kg_err(e, -errno, "sandbox: %s", strerror(errno));
		goto fail;
	}
	if (s->stdin_fd >= 0)
		c->ce.stdin_fd = fcntl(s->stdin_fd, F_DUPFD_CLOEXEC, 3);
	else
		c->ce.stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (c->ce.stdin_fd < 0) {
		rc = kg_err(e, -errno, "sandbox: stdin: %s", strerror(errno));
		goto fail;
	}
	if (!(p->disabled & KG_SB_LAYER_CGROUP)) {
		char why[PATH_MAX + 128];
		if (sb_cgroup_create(&c->cg, p->lim.mem_bytes, p->lim.nproc + 1, why, sizeof(why))) {
			c->failed |= KG_SB_LAYER_CGROUP;
			notes_add(c, why);
		}
	}
	if (s->profile != KG_SB_PROFILE_COMPILE && !p->deferred && !(p->disabled & KG_SB_LAYER_SECCOMP) &&
	    (rc = map_exec_gate(p, e)))
		goto fail;

	/* Signals stay blocked until the child runs the program: it starts with our handlers (until
	 * it resets them) and shares our TLS, so no handler may run on this thread meanwhile. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	masked = 1;
	p->err_w = c->ce.err_w, p->sync_r = c->ce.sync_r, p->out_w = c->ce.out_w;
	p->notify_c = c->ce.notify_c, p->status_w = c->ce.status_w, p->bpf_fd = c->ce.bpf_fd;
	p->stdin_fd = c->ce.stdin_fd;
	int clone_err;
	c->start_ns = kg_now_ns();
	c->deadline_ns = c->start_ns + (uint64_t)(p->lim.wall_s * 1e9);
	pid_t pid = clone_with_layers(c, &clone_err);
	if (pid < 0) {
		rc = kg_err(e, -errno, "sandbox: clone: %s", strerror(errno));
		goto fail;
	}
	c->pid = pid;
	c->pidns_init = !!(c->active & KG_SB_LAYER_PIDNS);
	int *child_ends[] = {&c->ce.err_w, &c->ce.sync_r, &c->ce.out_w, &c->ce.notify_c, &c->ce.status_w, &c->ce.stdin_fd};
	for (size_t i = 0; i < KG_ARRAY_LEN(child_ends); i++)
		close_fd(child_ends[i]);
	for (unsigned bit = KG_SB_LAYER_USERNS; bit <= KG_SB_LAYER_PIDNS; bit <<= 1) {
		if (!(c->failed & bit))
			continue;
		char msg[96];
		snprintf(msg, sizeof(msg), "%s: %s", kg_sb_layer_name(bit), strerrorname_np(clone_err));
		notes_add(c, msg);
	}

	if ((c->active & KG_SB_LAYER_USERNS) && (rc = write_id_maps(c, e)))
		goto fail;
	if (c->cg.active) {
		int arc = sb_cgroup_attach(&c->cg, pid);
		if (arc) {
			char msg[PATH_MAX + 64];
			snprintf(msg, sizeof(msg), "cgroup: attaching to %s: %s", c->cg.path, strerror(-arc));
			notes_add(c, msg);
			sb_cgroup_destroy(&c->cg);
			c->failed |= KG_SB_LAYER_CGROUP;
		} else {
			c->active |= KG_SB_LAYER_CGROUP;
		}
	}
	unsigned parent_failed = c->failed & s->required;
	if (parent_failed) {
		char names[256];
		rc = kg_err(e, -EPERM, "sandbox: required layer %s failed (%s)",
			    kg_sb_layers_str(parent_failed, names, sizeof(names)), c->notes);
		goto fail;
	}
	struct sb_sync sy = {0};
	if (!(p->disabled & KG_SB_LAYER_SECCOMP)) {
		kg_error fe = {0};
		int frc = build_filter(c, s, &sy, &fe);
		if (frc && (s->required & KG_SB_LAYER_SECCOMP)) {
			rc = kg_err(e, -EPERM, "sandbox: required layer seccomp failed: %s", fe.msg);
			goto fail;
		}
		if (frc) {
			c->failed |= KG_SB_LAYER_SECCOMP;
			notes_add(c, fe.msg);
			sy.bpf_len = 0;
		}
	}
	sy.active = c->active;
	sy.failed = c->failed;
	if (send(sync_w, &sy, sizeof(sy), MSG_NOSIGNAL) != (ssize_t)sizeof(sy)) {
		rc = kg_err(e, -errno, "sandbox: sync: %s", strerror(errno));
		goto fail;
	}
	close_fd(&sync_w);
	close_fd(&c->ce.bpf_fd);
	if ((rc = await_setup(c, e)))
		goto fail;
	/* the program runs on its own memory now (the plan stays: init may share it) */
	unmap_exec_gate(p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	*out = c;
	return 0;
fail:
	if (masked)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	close_fd(&sync_w);
	if (c->pid > 0 && !c->reaped) {
		c->killed = 1;
		kill_tree(c);
		c->exited = 1;
		reap(c);
	}
	kg_sb_free(c);
	return rc;
}

/* ---- scratch ownership ---- */

static int chown_tree(int at, const char *name, uid_t uid, gid_t gid)
{
	int rc = fchownat(at, name, uid, gid, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return rc;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rc ? rc : -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = chown_tree(dirfd(d), de->d_name, uid, gid);
		if (r && !rc)
			rc = r;
	}
	closedir(d);
	return rc;
}

int kg_sb_chown_scratch(const char *dir, kg_error *e)
{
	if (geteuid() != 0)
		return 0;
	int rc = chown_tree(AT_FDCWD, dir, SB_OUTER_ID, SB_OUTER_ID);
	if (rc)
		return kg_err(e, rc, "sandbox: chown %s: %s", dir, strerror(-rc));
	return 0;
}
