/* The cloned child: brings the layers up in minijail's order (namespaces, file system, identity,
 * fds, rlimits, no_new_privs, capabilities, Landlock, seccomp last) and execs the program. It
 * allocates nothing and reports failures to the parent as a fixed-size message over the CLOEXEC
 * error pipe (bubblewrap and minijail do the same).
 *
 * Process shape, with a pid namespace: the clone is pid 1 ("init") and shares the caller's memory
 * like a posix_spawn child (no page tables copied, no copy-on-write tax on the caller, no snapshot
 * of the caller's memory left inside); it starts pid 2 with CLONE_VM | CLONE_VFORK, which execs the
 * program, then only reaps. Sharing memory also means sharing the calling thread's TLS (errno), so:
 * the parent keeps its signals blocked and only polls while we run, before the sync we make no call
 * that can fail, and init's loop uses syscall() on paths that cannot fail. pid 2 cannot inspect
 * init (and thus the caller's memory): init keeps one harmless capability in its permitted set,
 * which fails the capability-subset test of every ptrace-mode access, and pid 2 sits in a nested
 * Landlock domain. Without a pid namespace the clone execs the program itself. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb_int.h"

/* Sanitizer builds: the code here runs on borrowed stacks and ends in execve or _exit, where ASan's
 * stack bookkeeping (__asan_handle_no_return) only prints warnings into the program's output. */
#if defined(__SANITIZE_ADDRESS__)
#define SB_CHILD __attribute__((no_sanitize_address))
#else
#define SB_CHILD
#endif

#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1u << 0)
#define SECBIT_NOROOT_LOCKED (1u << 1)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1u << 3)
#define SECBIT_KEEP_CAPS (1u << 4)
#define SECBIT_KEEP_CAPS_LOCKED (1u << 5)
#define SECBIT_NO_CAP_AMBIENT_RAISE (1u << 6)
#define SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED (1u << 7)
#endif

struct cstate {
	unsigned active, failed;
	int err_fd;
	int pidns, mountns;
	struct sb_sync sync;
	char notes[400];
};

SB_CHILD static void copy_str(char *dst, size_t n, const char *src)
{
	size_t i = 0;
	for (; src && src[i] && i + 1 < n; i++)
		dst[i] = src[i];
	dst[i] = '\0';
}

SB_CHILD static void note(struct cstate *st, const char *a, const char *b, const char *c)
{
	size_t len = strlen(st->notes);
	const char *parts[] = {len ? "; " : "", a, b, c};
	for (size_t i = 0; i < KG_ARRAY_LEN(parts); i++)
		for (const char *s = parts[i]; s && *s && len + 1 < sizeof(st->notes); s++)
			st->notes[len++] = *s;
	st->notes[len] = '\0';
}

SB_CHILD static const char *errname(int err)
{
	const char *s = strerrorname_np(err);
	return s ? s : "error";
}

SB_CHILD static void send_msg(struct cstate *st, int kind, int err, unsigned layer, const char *step,
		     const char *what)
{
	struct sb_msg m;
	memset(&m, 0, sizeof(m));
	m.kind = kind;
	m.err = err;
	m.layer = (int32_t)layer;
	m.active = st->active;
	m.failed = st->failed;
	copy_str(m.step, sizeof(m.step), step);
	copy_str(m.what, sizeof(m.what), what);
	copy_str(m.notes, sizeof(m.notes), st->notes);
	/* A dead parent makes this write raise SIGPIPE (default action: we die), which closes the
	 * window between clone and PR_SET_PDEATHSIG that getppid() cannot see inside a pid ns. */
	while (write(st->err_fd, &m, sizeof(m)) < 0 && errno == EINTR)
		;
}

SB_CHILD static _Noreturn void fail(struct cstate *st, const char *step, int err, const char *what)
{
	send_msg(st, SB_MSG_FAIL, err, 0, step, what);
	_exit(127);
}

SB_CHILD static void layer_down(struct cstate *st, const struct sb_plan *p, unsigned bit, int err)
{
	if (p->required & bit) {
		send_msg(st, SB_MSG_FAIL, err, bit, "layer", kg_sb_layer_name(bit));
		_exit(127);
	}
	st->failed |= bit;
	note(st, kg_sb_layer_name(bit), ": ", errname(err));
}

SB_CHILD static void reset_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The id changes go through syscall(): glibc's setresuid and friends would broadcast the change to
 * every thread of the caller's process (their list is in the memory we share or copied). */
SB_CHILD static int set_ids(uid_t uid, gid_t gid, int drop_groups)
{
	if (drop_groups && syscall(SYS_setgroups, 0, NULL))
		return -errno;
	if (syscall(SYS_setresgid, gid, gid, gid) || syscall(SYS_setresuid, uid, uid, uid))
		return -errno;
	return 0;
}

SB_CHILD static void close_from(int lo)
{
	if (!close_range((unsigned)lo, ~0u, 0))
		return;
	struct rlimit rl;
	int hi = getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
	for (int fd = lo; fd < hi; fd++)
		close(fd);
}

/* 0 stdin, 1+2 the output pipe, 3.. the handed fds, then the notify socket (inherited by the
 * program only when it applies its own filter), then the CLOEXEC plumbing; nothing else. */
SB_CHILD static void shuffle_fds(struct cstate *st, const struct sb_plan *p)
{
	int n = p->n_fds;
	int src[SB_MAX_FDS + 7], dst[SB_MAX_FDS + 7], cloexec[SB_MAX_FDS + 7], tmp[SB_MAX_FDS + 7];
	int k = 0;
#define SLOT(s, d, c) (src[k] = (s), dst[k] = (d), cloexec[k] = (c), k++)
	SLOT(p->stdin_fd, 0, 0);
	SLOT(p->out_w, 1, 0);
	SLOT(p->out_w, 2, 0);
	for (int i = 0; i < n; i++)
		SLOT(p->fds[i], 3 + i, 0);
	SLOT(p->notify_c, SB_SLOT_NOTIFY(n), !p->deferred);
	SLOT(p->err_w, SB_SLOT_ERR(n), 1);
	SLOT(p->status_w, SB_SLOT_STATUS(n), 1);
	SLOT(p->bpf_fd, SB_SLOT_BPF(n), 1);
#undef SLOT
	int base = SB_SLOT_END(n);
	for (int i = 0; i < k; i++) {
		tmp[i] = -1;
		if (src[i] >= 0 && (tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, base)) < 0)
			fail(st, "moving fds", errno, "F_DUPFD");
		if (src[i] == p->err_w && tmp[i] >= 0)
			st->err_fd = tmp[i];
	}
	for (int i = 0; i < k; i++) {
		if (tmp[i] < 0) {
			close(dst[i]);
			continue;
		}
		if (dup3(tmp[i], dst[i], cloexec[i] ? O_CLOEXEC : 0) < 0)
			fail(st, "moving fds", errno, "dup3");
	}
	st->err_fd = SB_SLOT_ERR(n);
	close_from(base);
}

SB_CHILD static void set_rlimits(struct cstate *st, const struct sb_plan *p)
{
	const struct kg_sb_limits *l = &p->lim;
	rlim_t nofile = l->nofile < (uint32_t)SB_SLOT_END(p->n_fds) + 8 ? (rlim_t)SB_SLOT_END(p->n_fds) + 8
									 : l->nofile;
	/* the pid-ns init counts against NPROC too */
	rlim_t nproc = (rlim_t)l->nproc + (st->pidns ? 1 : 0);
	struct {
		int res;
		rlim_t soft, hard;
	} lims[] = {
		/* SIGXCPU at the soft limit, SIGKILL a second later */
		{RLIMIT_CPU, l->cpu_s, (rlim_t)l->cpu_s + 1},
		{RLIMIT_NOFILE, nofile, nofile},
		{RLIMIT_NPROC, nproc, nproc},
		{RLIMIT_FSIZE, l->fsize, l->fsize},
		{RLIMIT_CORE, 0, 0},
		{RLIMIT_AS, l->mem_bytes, l->mem_bytes},
	};
	for (size_t i = 0; i < KG_ARRAY_LEN(lims); i++) {
		/* RLIMIT_AS comes last, in the program's process right before execve (as_limit()):
		 * until then this process shares kgate's address space, which may be far larger than
		 * the program's bound (gigabyte tensors), and every mmap here would fail. */
		if (lims[i].res == RLIMIT_AS)
			continue;
		struct rlimit rl = {lims[i].soft, lims[i].hard};
		if (setrlimit(lims[i].res, &rl)) {
			layer_down(st, p, KG_SB_LAYER_RLIMITS, errno);
			return;
		}
	}
	st->active |= KG_SB_LAYER_RLIMITS;
}

/* Capabilities: bounding and ambient sets emptied and securebits locked, so that uid 0 (inside the
 * user namespace the program runs as 0) gains nothing at execve; then the identity change of a
 * root caller without a user namespace; then only init's one marker capability stays permitted
 * (pid 2 drops it too). Needs CAP_SETPCAP, so it runs before anything else drops capabilities. */
SB_CHILD static void drop_caps(struct cstate *st, const struct sb_plan *p)
{
	int nobody = !(st->active & KG_SB_LAYER_USERNS) && p->host_root;
	int bound_rc = 0;
	/* keep_caps, locked on, carries the marker across the change to nobody */
	if (nobody && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0))
		bound_rc = -errno;
	unsigned secbits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
			   SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			   SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED | (nobody ? SECBIT_KEEP_CAPS : 0);
	if (cap_set_secbits(secbits))
		bound_rc = -errno;
	for (cap_value_t cap = 0; cap < (cap_value_t)cap_max_bits(); cap++)
		if (cap_drop_bound(cap) && !bound_rc)
			bound_rc = -errno;
	if (cap_reset_ambient() && !bound_rc)
		bound_rc = -errno;
	int rc;
	/* Without a user namespace a root caller's child would stay uid 0, and owner permissions
	 * alone open root's files (/etc/shadow is 0640 root): become nobody, like minijail -u. */
	if (nobody && (rc = set_ids(SB_OUTER_ID, SB_OUTER_ID, 1)))
		fail(st, "changing to uid 65534", -rc, "");
	if (cap_set_proc((cap_t)(st->pidns ? p->initcaps : p->nocaps))) {
		layer_down(st, p, KG_SB_LAYER_CAPS, errno);
		return;
	}
	st->active |= KG_SB_LAYER_CAPS;
	/* an unprivileged caller without a user ns has nothing to drop from the bounding set, and
	 * no_new_privs keeps file capabilities from adding any */
	if (bound_rc)
		note(st, "caps: bounding set kept (", errname(-bound_rc), ")");
}

SB_CHILD static _Noreturn void run_init(int status_fd, pid_t prog)
{
	/* Its end is the program's end: when init exits the kernel kills whatever is left in the
	 * namespace. syscall() and no glibc wrapper: no cancellation bookkeeping in the shared TLS,
	 * and errno is written only on failure, which wait4 and write do not hit here (a dead
	 * parent kills us with SIGPIPE or PDEATHSIG first). */
	syscall(SYS_close_range, 0, status_fd - 1, 0);
	syscall(SYS_close_range, status_fd + 1, ~0u, 0);
	for (;;) {
		struct sb_exit ex;
		memset(&ex, 0, sizeof(ex));
		long w = syscall(SYS_wait4, -1, &ex.status, 0, &ex.ru);
		if (w == prog) {
			syscall(SYS_write, status_fd, &ex, sizeof(ex));
			syscall(SYS_exit_group, 0);
		}
		if (w < 0)
			syscall(SYS_exit_group, 0);
	}
}

struct prog_args {
	struct cstate *st;
	const struct sb_plan *p;
};

/* A second Landlock layer that forbids only what nobody here can do anyway (block devices): it
 * puts the program into a domain nested under init's, and Landlock lets a domain ptrace-access
 * only its own descendants. */
SB_CHILD static void nest_landlock(void)
{
	uint64_t attr = 1ull << 11; /* LANDLOCK_ACCESS_FS_MAKE_BLOCK */
	long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (fd < 0)
		return;
	syscall(SYS_landlock_restrict_self, fd, 0);
	close((int)fd);
}

/* The address-space bound, set once nothing more needs mapping before execve replaces the
 * (shared) address space with the program's own. A GPU driver reserves huge ranges (its spec says
 * address_space_unbounded) and ASan's shadow needs terabytes, so those go without; an interpreter's
 * reservations are huge too, but its data is not, and RLIMIT_DATA bounds that (data_bounded). */
SB_CHILD static void as_limit(struct cstate *st, const struct sb_plan *p)
{
	const struct kg_sb_limits *l = &p->lim;
	if (!l->mem_bytes || l->mem_bytes == KG_SB_MEM_UNBOUNDED || p->sanitize)
		return;
	struct rlimit rl = {l->mem_bytes, l->mem_bytes};
	if (l->address_space_unbounded) {
		if (l->data_bounded && setrlimit(RLIMIT_DATA, &rl))
			fail(st, "rlimits", errno, "RLIMIT_DATA");
		return;
	}
	if (setrlimit(RLIMIT_AS, &rl))
		fail(st, "rlimits", errno, "RLIMIT_AS");
}

SB_CHILD static _Noreturn void run_program(struct cstate *st, const struct sb_plan *p)
{
	int n = p->n_fds;
	const char *path = p->exec_path;
	close(SB_SLOT_STATUS(n));
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (st->pidns) {
		if (cap_set_proc((cap_t)p->nocaps))
			fail(st, "dropping capabilities", errno, "pid 2");
		if (st->active & KG_SB_LAYER_LANDLOCK)
			nest_landlock();
	}
	if (!(p->disabled & KG_SB_LAYER_SECCOMP) && st->sync.bpf_len) {
		void *bpf = mmap(NULL, st->sync.bpf_len, PROT_READ, MAP_PRIVATE, SB_SLOT_BPF(n), 0);
		if (bpf == MAP_FAILED)
			fail(st, "seccomp", errno, "mapping the filter");
		/* the parent's page holding our path (see spawn.c) */
		if (p->exec_gate)
			path = (const char *)(uintptr_t)p->exec_gate;
		as_limit(st, p);
		struct sock_fprog prog = {.len = (unsigned short)(st->sync.bpf_len / sizeof(struct sock_filter)),
			.filter = bpf};
		long lfd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				   st->sync.notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
		if (lfd < 0) {
			layer_down(st, p, KG_SB_LAYER_SECCOMP, errno);
		} else {
			st->active |= KG_SB_LAYER_SECCOMP;
			if (st->sync.notify) {
				int rc = sb_send_fd(SB_SLOT_NOTIFY(n), (int)lfd);
				close((int)lfd);
				if (rc)
					fail(st, "seccomp", -rc, "passing the listener");
			}
		}
	}
	if ((p->disabled & KG_SB_LAYER_SECCOMP) || !st->sync.bpf_len)
		as_limit(st, p);
	send_msg(st, SB_MSG_REPORT, 0, 0, "", "");
	execve(path, p->argv, p->envp);
	fail(st, "execve", errno, p->exec_path);
}

SB_CHILD static int program_main(void *arg)
{
	struct prog_args *a = arg;
	run_program(a->st, a->p);
}

SB_CHILD _Noreturn void sb_child_main(struct sb_plan *p)
{
	struct cstate st;
	memset(&st, 0, sizeof(st));
	st.err_fd = p->err_w;
	/* Until the parent's sync message arrives it runs beside us in the same TLS: only calls
	 * that succeed (namespace creation practically always does). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	static const struct {
		unsigned bit;
		int flag;
	} ns[] = {{KG_SB_LAYER_MOUNTNS, CLONE_NEWNS}, {KG_SB_LAYER_NETNS, CLONE_NEWNET},
		{KG_SB_LAYER_IPCNS, CLONE_NEWIPC}, {KG_SB_LAYER_UTSNS, CLONE_NEWUTS}};
	unsigned ns_failed = 0;
	for (size_t i = 0; i < KG_ARRAY_LEN(ns); i++) {
		if (p->disabled & ns[i].bit)
			continue;
		long r = syscall(SYS_unshare, ns[i].flag);
		if (r)
			ns_failed |= ns[i].bit;
		else
			st.active |= ns[i].bit;
	}
	size_t got = 0;
	while (got < sizeof(st.sync)) {
		long r = syscall(SYS_read, p->sync_r, (char *)&st.sync + got, sizeof(st.sync) - got);
		if (r <= 0)
			syscall(SYS_exit_group, 0); /* the parent gave up on us (EINTR: no handlers) */
		got += (size_t)r;
	}
	/* the parent now only waits for our report */
	close(p->sync_r);
	st.pidns = !!(st.sync.active & KG_SB_LAYER_PIDNS);
	if (!st.pidns && getppid() != p->parent_pid)
		_exit(0);
	st.active |= st.sync.active;
	st.failed |= st.sync.failed;
	reset_signals();
	for (size_t i = 0; i < KG_ARRAY_LEN(ns); i++) {
		if (!(ns_failed & ns[i].bit))
			continue;
		/* redo the failed ones for their errno (ours could not be trusted before the sync) */
		if (unshare(ns[i].flag))
			layer_down(&st, p, ns[i].bit, errno);
		else
			st.active |= ns[i].bit;
	}
	/* own session and process group: the watchdog's kill(-pgid) reaches every descendant, and
	 * no controlling terminal to inject input into */
	setsid();
	umask(022);
	if ((st.active & KG_SB_LAYER_UTSNS) && sethostname("kgate", 5))
		note(&st, "utsns: sethostname: ", errname(errno), "");

	st.mountns = !!(st.active & KG_SB_LAYER_MOUNTNS);
	const char *what = "";
	int rc;
	if (st.mountns) {
		/* opened with the ids we were cloned with, which can still traverse the caller's
		 * directories; the user-ns identity below may not */
		if ((rc = sb_mounts_open_sources(p, &what)))
			fail(&st, "bind source", -rc, what);
	} else {
		for (int i = 0; i < p->n_mnts; i++)
			if (p->mnts[i].remapped)
				fail(&st, "path needs the mount namespace", EPERM, p->mnts[i].dst);
	}
	/* Become the namespace's uid/gid 0, which the parent mapped to 65534 (root caller) or to the
	 * caller's own ids: files on the new root's tmpfs can only be created by a mapped id. */
	if ((st.active & KG_SB_LAYER_USERNS) && (rc = set_ids(0, 0, p->host_root)))
		fail(&st, "changing to uid 0 of the user namespace", -rc, "");
	if (st.mountns && (rc = sb_mounts_build(p, &what, st.notes, sizeof(st.notes))))
		fail(&st, "mount", -rc, what);
	if (chdir(p->cwd))
		fail(&st, "chdir", errno, p->cwd);

	shuffle_fds(&st, p);
	set_rlimits(&st, p);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		layer_down(&st, p, KG_SB_LAYER_NO_NEW_PRIVS, errno);
	else
		st.active |= KG_SB_LAYER_NO_NEW_PRIVS;
	drop_caps(&st, p);
	if (!(p->disabled & KG_SB_LAYER_LANDLOCK)) {
		int abi = sb_landlock_apply(p, st.mountns, st.notes, sizeof(st.notes));
		if (abi < 0)
			layer_down(&st, p, KG_SB_LAYER_LANDLOCK, -abi);
		else
			st.active |= KG_SB_LAYER_LANDLOCK;
	}

	/* Die with the spawner, again: the kernel clears the parent-death signal at every change of
	 * the effective ids, and a root caller's set_ids above (uid 0 of the user namespace is 65534
	 * outside, or 65534 itself without one) made one, so init outlived a kgate killed by any
	 * signal and kept its program running (kgate 0.2: `kgate task import` under timeout left the
	 * sandboxed torch process behind). No credential changes after this point. A spawner that
	 * died before this call is still noticed: pid 2's report below (or init's status write)
	 * finds no reader and dies of SIGPIPE. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (st.pidns) {
		/* pid 2 borrows our memory until its execve, like vfork, on a stack of its own
		 * while we wait */
		struct prog_args a = {&st, p};
		int prog = clone(program_main, (char *)p->stack2 + p->stack_sz, CLONE_VM | CLONE_VFORK | SIGCHLD,
				 &a);
		if (prog < 0)
			fail(&st, "clone", errno, "pid 2");
		run_init(SB_SLOT_STATUS(p->n_fds), prog);
	}
	run_program(&st, p);
}
