/* Starting a sandboxed child from the parent: plan it from the spec, clone it into its first
 * namespaces, write its id maps, hand it the seccomp filter the spec describes, and wait until it
 * either runs the program or reports why setup failed. supervise.c takes over from there. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb_int.h"

#ifndef SYS_mseal
#define SYS_mseal 462 /* the same number on every architecture that has it */
#endif

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

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

static void resolve_limits(struct kg_sb_limits *l, const struct kg_sb_spec *s)
{
	*l = s->limits;
	if (!(l->wall_s > 0))
		l->wall_s = 60;
	if (l->wall_s > 1e6) /* a deadline in nanoseconds must not overflow */
		l->wall_s = 1e6;
	if (!l->cpu_s)
		l->cpu_s = (uint32_t)ceil(l->wall_s) + 1;
	/* from here on 0 means unbounded: what the rlimit, cgroup and filter code already read so */
	if (!l->mem_bytes)
		l->mem_bytes = 8 * GiB;
	else if (l->mem_bytes == KG_SB_MEM_UNBOUNDED)
		l->mem_bytes = 0;
	if (!l->nproc)
		l->nproc = s->profile == KG_SB_PROFILE_COMPILE ? 256 : s->allow_threads ? 64 : 1;
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

/* The filter the spec describes: what spawn loads itself, or what a deferred program finds in its
 * environment (KG_SB_ENV_FILTER) and loads, so that both get the same. */
static int describe_filter(const struct kg_sb_child *c, const struct kg_sb_spec *s, struct sb_filter_desc *d,
			   kg_error *e)
{
	memset(d, 0, sizeof(*d));
	d->profile = s->profile;
	d->allow_threads = !!s->allow_threads;
	/* sanitizer runtimes map terabytes: ASan's shadow at start (under the filter when spawn
	 * loads it), its allocator's regions later */
	d->mem_bytes = c->plan.sanitize ? 0 : c->plan.lim.mem_bytes;
	d->readonly_opens = s->readonly_opens == KG_SB_RO_OPENS_EACCES ? KG_SB_RO_OPENS_EACCES : !!s->readonly_opens;
	/* only a program that applies its own filter can be distrusted after it initialised */
	d->watched = s->watched && s->seccomp_deferred && s->profile == KG_SB_PROFILE_RUN;
	return sb_filter_desc_names(d, s->syscalls, e);
}

static int build_env(struct kg_sb_child *c, const struct kg_sb_spec *s, const struct sb_filter_desc *d,
		     kg_error *e)
{
	size_t n = 0;
	while (s->envp && s->envp[n])
		n++;
	char **env = calloc(n + 6, sizeof(*env));
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
		int len = snprintf(c->env_filter, sizeof(c->env_filter), "%s=", KG_SB_ENV_FILTER);
		int rc = sb_filter_desc_format(d, c->env_filter + len, sizeof(c->env_filter) - (size_t)len);
		if (rc < 0) {
			free(env);
			return kg_err(e, rc, "sandbox: describing the filter: %s", strerror(-rc));
		}
		env[k++] = c->env_filter;
		/* the program seals itself: whether mseal must hold, and what it may open after */
		snprintf(c->env_mseal, sizeof(c->env_mseal), "%s=%d", KG_SB_ENV_MSEAL, !!(c->active & KG_SB_LAYER_MSEAL));
		env[k++] = c->env_mseal;
		len = snprintf(c->env_seal, sizeof(c->env_seal), "%s=", KG_SB_ENV_SEAL);
		rc = sb_seal_env_format(s->sealed_opens, c->env_seal + len, sizeof(c->env_seal) - (size_t)len);
		if (rc < 0) {
			free(env);
			return kg_err(e, rc, "sandbox: sealed_opens: %s", strerror(-rc));
		}
		env[k++] = c->env_seal;
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

void sb_unmap_exec_gate(struct sb_plan *p)
{
	if (p->exec_gate)
		munmap((void *)(uintptr_t)p->exec_gate, 4096);
	p->exec_gate = 0;
}

static int build_filter(struct kg_sb_child *c, const struct kg_sb_spec *s, const struct sb_filter_desc *d,
			struct sb_sync *sy, kg_error *e)
{
	scmp_filter_ctx ctx = NULL;
	int rc;
	sy->notify = sb_notify_supported();
	if (s->seccomp_deferred) {
		rc = sb_filter_baseline(sy->notify, &ctx, e);
		sy->notify = 0; /* the listener is for the profile kg_sb_seccomp_apply loads */
	} else {
		struct sb_filter_params fp = {
			.desc = d,
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
			sb_set_why(c, KG_SB_END_TIMEOUT, "setup took longer than the wall-clock limit");
			c->killed = 1;
			sb_kill_tree(c);
		}
		short fd_ev, err_ev, exit_ev;
		int r = sb_poll_once(c, -1, c->err_r, c->killed ? 1000 : sb_ms_until(now, c->deadline_ns), &fd_ev,
				  &err_ev, &exit_ev);
		if (r < 0)
			return kg_err(e, r, "sandbox: poll: %s", strerror(-r));
		if (!err_ev)
			continue;
		ssize_t n = read(c->err_r, (char *)&m + have, sizeof(m) - have);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			sb_close_fd(&c->err_r);
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
	sb_kill_tree(c);
	c->exited = 1;
	sb_reap(c);
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
	    (s->n_paths && !s->paths) || (unsigned)s->profile > KG_SB_PROFILE_RUN ||
	    (unsigned)s->proc > KG_SB_PROC_RW)
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
	struct sb_filter_desc want;

	p->profile = s->profile;
	p->required = s->required;
	p->disabled = s->disabled;
	p->deferred = !!s->seccomp_deferred;
	p->allow_threads = !!s->allow_threads;
	p->sanitize = sanitize_mode();
	p->host_root = geteuid() == 0;
	p->parent_pid = getpid();
	resolve_limits(&p->lim, s);
	snprintf(c->name, sizeof(c->name), "%s", s->name ? s->name : kg_sb_profile_name(s->profile));
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
	if (!(p->disabled & KG_SB_LAYER_MSEAL)) {
		int mrc = sb_mseal_probe();
		if (mrc) {
			char msg[64];
			snprintf(msg, sizeof(msg), "mseal: %s", strerrorname_np(-mrc));
			notes_add(c, msg);
			c->failed |= KG_SB_LAYER_MSEAL;
		} else {
			c->active |= KG_SB_LAYER_MSEAL;
		}
	}
	if ((rc = describe_filter(c, s, &want, e)) || (rc = sb_mounts_plan(p, s, e)) ||
	    (rc = build_env(c, s, &want, e)))
		goto fail;
	c->watched = want.watched;
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
		sb_close_fd(child_ends[i]);
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
	/* the tree's memory: the cgroup's memory.max where it came up, else the supervisor's count */
	sb_mem_init(c, s);
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
		int frc = build_filter(c, s, &want, &sy, &fe);
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
	sb_close_fd(&sync_w);
	sb_close_fd(&c->ce.bpf_fd);
	if ((rc = await_setup(c, e)))
		goto fail;
	/* the program runs on its own memory now (the plan stays: init may share it) */
	sb_unmap_exec_gate(p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	*out = c;
	return 0;
fail:
	if (masked)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	sb_close_fd(&sync_w);
	if (c->pid > 0 && !c->reaped) {
		c->killed = 1;
		sb_kill_tree(c);
		c->exited = 1;
		sb_reap(c);
	}
	kg_sb_free(c);
	return rc;
}

/* Whether the mseal layer can be given (the spawner's probe, before the program runs). */
int sb_mseal_probe(void)
{
	/* an empty range is accepted and seals nothing where the call exists: ENOSYS (or EINVAL from
	 * a kernel that knows the number for something else) where it does not */
	if (syscall(SYS_mseal, 0UL, 0UL, 0UL))
		return -errno;
	return 0;
}

/* What a sealed program may still open, as the environment tells it (inside_seal.c parses it). */
int sb_seal_env_format(const char *const *paths, char *out, size_t n)
{
	size_t len = 0;
	out[0] = '\0';
	for (size_t i = 0; paths && paths[i]; i++) {
		const char *p = paths[i];
		const char *path = !strncmp(p, "r:/", 3) ? p + 2 : !strncmp(p, "rw:/", 4) ? p + 3 : NULL;
		if (!path || strpbrk(p, ",="))
			return -EINVAL;
		int k = snprintf(out + len, n - len, "%s%s", len ? "," : "", p);
		if (k < 0 || (size_t)k >= n - len)
			return -ENAMETOOLONG;
		len += (size_t)k;
		(void)path;
	}
	return (int)len;
}
