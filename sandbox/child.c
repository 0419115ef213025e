/* The cloned child: brings the layers up in minijail's order (namespaces, file system, identity,
 * fds, rlimits, no_new_privs, capabilities, Landlock, seccomp last) and execs the program. It runs
 * between a raw clone and execve, so it allocates nothing and reports failures to the parent as a
 * fixed-size message over the CLOEXEC error pipe (bubblewrap and minijail do the same). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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

#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1u << 0)
#define SECBIT_NOROOT_LOCKED (1u << 1)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1u << 3)
#define SECBIT_KEEP_CAPS_LOCKED (1u << 5)
#define SECBIT_NO_CAP_AMBIENT_RAISE (1u << 6)
#define SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED (1u << 7)
#endif

struct cstate {
	unsigned active, failed;
	int err_fd;
	struct sb_sync sync;
	char notes[400];
};

static void copy_str(char *dst, size_t n, const char *src)
{
	size_t i = 0;
	for (; src && src[i] && i + 1 < n; i++)
		dst[i] = src[i];
	dst[i] = '\0';
}

static void note(struct cstate *st, const char *a, const char *b, const char *c)
{
	size_t len = strlen(st->notes);
	const char *parts[] = {len ? "; " : "", a, b, c};
	for (size_t i = 0; i < KG_ARRAY_LEN(parts); i++)
		for (const char *s = parts[i]; s && *s && len + 1 < sizeof(st->notes); s++)
			st->notes[len++] = *s;
	st->notes[len] = '\0';
}

static const char *errname(int err)
{
	const char *s = strerrorname_np(err);
	return s ? s : "error";
}

static void send_msg(struct cstate *st, int kind, int err, unsigned layer, const char *step,
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

static _Noreturn void fail(struct cstate *st, const char *step, int err, const char *what)
{
	send_msg(st, SB_MSG_FAIL, err, 0, step, what);
	_exit(127);
}

static void layer_down(struct cstate *st, const struct sb_plan *p, unsigned bit, int err)
{
	if (p->required & bit) {
		send_msg(st, SB_MSG_FAIL, err, bit, "layer", kg_sb_layer_name(bit));
		_exit(127);
	}
	st->failed |= bit;
	note(st, kg_sb_layer_name(bit), ": ", errname(err));
}

static void reset_signals(void)
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

/* Inside the user namespace: become its uid/gid 0, which the parent mapped to 65534 (root host)
 * or to the caller's own ids; as root, also shed the host's supplementary groups. */
static void become_ns_root(struct cstate *st, const struct sb_plan *p)
{
	if (setresgid(0, 0, 0))
		fail(st, "setresgid", errno, "0");
	if (p->host_root && setgroups(0, NULL))
		fail(st, "setgroups", errno, "");
	if (setresuid(0, 0, 0))
		fail(st, "setresuid", errno, "0");
}

/* Without a user namespace a root parent's child would stay uid 0, and owner permissions alone
 * open root's files (/etc/shadow is 0640 root): drop to nobody like minijail -u. */
static void become_nobody(struct cstate *st)
{
	if (setgroups(0, NULL))
		fail(st, "setgroups", errno, "");
	if (setresgid(SB_OUTER_ID, SB_OUTER_ID, SB_OUTER_ID))
		fail(st, "setresgid", errno, "65534");
	if (setresuid(SB_OUTER_ID, SB_OUTER_ID, SB_OUTER_ID))
		fail(st, "setresuid", errno, "65534");
}

static void close_from(int lo)
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
static void shuffle_fds(struct cstate *st, struct sb_plan *p)
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

static void set_rlimits(struct cstate *st, const struct sb_plan *p, int pidns)
{
	const struct kg_sb_limits *l = &p->lim;
	rlim_t nofile = l->nofile < (uint32_t)SB_SLOT_END(p->n_fds) + 8 ? (rlim_t)SB_SLOT_END(p->n_fds) + 8
									 : l->nofile;
	/* the pid-ns init counts against NPROC too */
	rlim_t nproc = (rlim_t)l->nproc + (pidns ? 1 : 0);
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
		/* the CUDA driver reserves huge address ranges; ASan's shadow needs terabytes */
		if (lims[i].res == RLIMIT_AS &&
		    (!l->mem_bytes || p->profile == KG_SB_PROFILE_RUN_CUDA || p->sanitize))
			continue;
		struct rlimit rl = {lims[i].soft, lims[i].hard};
		if (setrlimit(lims[i].res, &rl)) {
			layer_down(st, p, KG_SB_LAYER_RLIMITS, errno);
			return;
		}
	}
	st->active |= KG_SB_LAYER_RLIMITS;
}

/* Bounding set and ambient set emptied, securebits locked so that uid 0 (inside the user
 * namespace, where the program runs as 0) gains nothing at execve. Needs CAP_SETPCAP, so it runs
 * before a root parent's child turns into nobody. */
static int drop_bound(void)
{
	int rc = 0;
	if (cap_set_secbits(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
			    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED))
		rc = -errno;
	for (cap_value_t cap = 0; cap < (cap_value_t)cap_max_bits(); cap++)
		if (cap_drop_bound(cap) && !rc)
			rc = -errno;
	if (cap_reset_ambient() && !rc)
		rc = -errno;
	return rc;
}

static _Noreturn void run_init(int status_fd, pid_t prog)
{
	/* pid 1 of the namespace: the program runs as pid 2 so that it keeps ordinary signal
	 * semantics (init ignores its own SIGABRT, SIGXCPU, ...). Its end is our end: when we exit
	 * the kernel kills whatever it left in the namespace. */
	close_range(0, (unsigned)status_fd - 1, 0);
	close_from(status_fd + 1);
	for (;;) {
		int status;
		pid_t w = waitpid(-1, &status, 0);
		if (w == prog) {
			while (write(status_fd, &status, sizeof(status)) < 0 && errno == EINTR)
				;
			_exit(0);
		}
		if (w < 0 && errno != EINTR)
			_exit(0);
	}
}

static _Noreturn void run_program(struct cstate *st, struct sb_plan *p)
{
	int n = p->n_fds;
	const char *path = p->exec_path;
	close(SB_SLOT_STATUS(n));
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!(p->disabled & KG_SB_LAYER_SECCOMP) && st->sync.bpf_len) {
		void *bpf = mmap(NULL, st->sync.bpf_len, PROT_READ, MAP_PRIVATE, SB_SLOT_BPF(n), 0);
		if (bpf == MAP_FAILED)
			fail(st, "seccomp", errno, "mapping the filter");
		if (p->exec_gate) {
			size_t len = strlen(path) + 1;
			void *g = mmap((void *)(uintptr_t)p->exec_gate, 4096, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (g != (void *)(uintptr_t)p->exec_gate)
				fail(st, "seccomp", g == MAP_FAILED ? errno : EEXIST, "mapping the exec gate");
			if (len > 4096)
				fail(st, "execve", ENAMETOOLONG, p->exec_path);
			memcpy(g, path, len);
			path = g;
		}
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
	send_msg(st, SB_MSG_REPORT, 0, 0, "", "");
	execve(path, p->argv, p->envp);
	fail(st, "execve", errno, p->exec_path);
}

_Noreturn void sb_child_main(struct sb_plan *p)
{
	struct cstate st;
	memset(&st, 0, sizeof(st));
	st.err_fd = p->err_w;
	reset_signals();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	size_t got = 0;
	while (got < sizeof(st.sync)) {
		ssize_t r = read(p->sync_r, (char *)&st.sync + got, sizeof(st.sync) - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			_exit(0); /* the parent gave up on us */
		got += (size_t)r;
	}
	int pidns = !!(st.sync.active & KG_SB_LAYER_PIDNS);
	if (!pidns && getppid() != p->parent_pid)
		_exit(0);
	st.active = st.sync.active;
	st.failed = st.sync.failed;
	/* own session and process group: the watchdog's kill(-pgid) reaches every descendant, and
	 * no controlling terminal to inject input into */
	setsid();
	umask(022);

	static const struct {
		unsigned bit;
		int flag;
	} ns[] = {{KG_SB_LAYER_MOUNTNS, CLONE_NEWNS}, {KG_SB_LAYER_NETNS, CLONE_NEWNET},
		{KG_SB_LAYER_IPCNS, CLONE_NEWIPC}, {KG_SB_LAYER_UTSNS, CLONE_NEWUTS}};
	for (size_t i = 0; i < KG_ARRAY_LEN(ns); i++) {
		if (p->disabled & ns[i].bit)
			continue;
		if (unshare(ns[i].flag))
			layer_down(&st, p, ns[i].bit, errno);
		else
			st.active |= ns[i].bit;
	}
	if (st.active & KG_SB_LAYER_UTSNS)
		if (sethostname("kgate", 5))
			note(&st, "utsns: sethostname: ", errname(errno), "");

	int mountns = !!(st.active & KG_SB_LAYER_MOUNTNS);
	const char *what = "";
	int rc;
	if (mountns) {
		/* opened with the ids we were cloned with, which can still traverse the caller's
		 * directories; the user-ns identity below may not */
		if ((rc = sb_mounts_open_sources(p, &what)))
			fail(&st, "bind source", -rc, what);
	} else {
		for (int i = 0; i < p->n_mnts; i++)
			if (p->mnts[i].remapped)
				fail(&st, "path needs the mount namespace", EPERM, p->mnts[i].dst);
	}
	/* files on the new root's tmpfs can only be created by an id mapped in the namespace */
	if (st.active & KG_SB_LAYER_USERNS)
		become_ns_root(&st, p);
	if (mountns && (rc = sb_mounts_build(p, &what, st.notes, sizeof(st.notes))))
		fail(&st, "mount", -rc, what);
	if (chdir(p->cwd))
		fail(&st, "chdir", errno, p->cwd);

	shuffle_fds(&st, p);
	set_rlimits(&st, p, pidns);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		layer_down(&st, p, KG_SB_LAYER_NO_NEW_PRIVS, errno);
	else
		st.active |= KG_SB_LAYER_NO_NEW_PRIVS;

	int bound_rc = drop_bound();
	if (!(st.active & KG_SB_LAYER_USERNS) && p->host_root)
		become_nobody(&st);
	if (cap_set_proc((cap_t)p->nocaps)) {
		layer_down(&st, p, KG_SB_LAYER_CAPS, errno);
	} else {
		st.active |= KG_SB_LAYER_CAPS;
		/* an unprivileged caller without a user ns has nothing to drop from the bounding set,
		 * and no_new_privs keeps file capabilities from adding any */
		if (bound_rc)
			note(&st, "caps: bounding set kept (no CAP_SETPCAP)", "", "");
	}

	if (!(p->disabled & KG_SB_LAYER_LANDLOCK)) {
		int abi = sb_landlock_apply(p, mountns, st.notes, sizeof(st.notes));
		if (abi < 0)
			layer_down(&st, p, KG_SB_LAYER_LANDLOCK, -abi);
		else
			st.active |= KG_SB_LAYER_LANDLOCK;
	}

	if (pidns) {
		/* raw clone: glibc's fork would take malloc's locks, which a raw-cloned copy of a
		 * multi-threaded parent may hold forever */
		long prog = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (prog < 0)
			fail(&st, "fork", errno, "pid 2");
		if (prog > 0)
			run_init(SB_SLOT_STATUS(p->n_fds), (pid_t)prog);
	}
	run_program(&st, p);
}
