/* The seccomp layer: per-profile allowlists (libseccomp) plus the extras a spec names, the baseline
 * deny list for programs that apply their own filter later (which they load with
 * inside_seccomp.c's kg_sb_seccomp_apply). Denials go to the supervising parent as user
 * notifications so that they can be reported by name; where that is not available the filter
 * kills instead. What one program needs beyond its
 * profile comes from its spec (syscalls); calls that need argument checks have their own rule. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "sb_int.h"

#ifndef ARCH_SET_FS
#define ARCH_SET_FS 0x1002
#define ARCH_GET_FS 0x1003
#endif
#ifndef ARCH_CET_STATUS
#define ARCH_CET_STATUS 0x3001
#endif
#ifndef ARCH_GET_XCOMP_SUPP
#define ARCH_GET_XCOMP_SUPP 0x1021
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#endif

/* Namespace flags: no profile may create namespaces (kernel attack surface, and a way around the
 * pid namespace's kill semantics). */
#define NS_FLAGS                                                                                   \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |    \
		    CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME))

/* What a loaded .so doing math needs, and what the dynamic loader needs to load it (the verifier
 * separately refuses candidates importing mprotect). open(at): see open_rules. */
static const char *const run_allow[] = {
	"read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close",
	"fstat", "newfstatat", "statx", "stat", "lstat",
	"access", "faccessat", "faccessat2", /* paths: mounts + Landlock */
	"readlink", "getcwd", "getdents64",
	"brk",
	"futex", "set_robust_list", "rseq", "set_tid_address",
	"exit", "exit_group", "restart_syscall",
	"rt_sigreturn", "rt_sigprocmask", "sigaltstack",
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
	"getrandom", "sched_yield", "sched_getaffinity", "getcpu",
	"getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "uname",
	"sysinfo", "getrusage", "times", "getrlimit",
	"dup", "dup2", "dup3", "poll", "ppoll",
};

/* Changes to the memory map: allowed outright, or (watched) left to the filter's default action,
 * the supervisor, which checks them against the program's sealed ranges (supervise.c). */
static const char *const map_calls[] = {"munmap", "mprotect", "madvise"};

/* Derived with strace -f on gcc/cc1/as/collect2/ld (cc -O2 -shared -fPIC, with and without errors,
 * g++ -pthread) and nvcc/cudafe++/cicc/ptxas/fatbinary/nvlink, plus the close relatives of each
 * (the *at and 64 forms) so that another libc or toolchain version does not trip. */
static const char *const compile_allow[] = {
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "lseek", "close",
	"close_range", "fstat", "newfstatat", "statx", "stat", "lstat", "statfs", "fstatfs",
	"access", "faccessat", "faccessat2", "readlink", "readlinkat", "getcwd",
	"chdir", "fchdir", "getdents64", "umask", "chmod", "fchmod", "fchmodat",
	"rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir",
	"link", "linkat", "symlink", "symlinkat", "ftruncate", "fallocate", "fsync", "fdatasync",
	"utimensat", "fadvise64", "copy_file_range", "sendfile",
	"munmap", "mprotect", "madvise", "brk", "mincore",
	"futex", "set_robust_list", "rseq", "set_tid_address",
	"execve", "vfork", "fork", "wait4", "waitid", "kill", "tgkill", "tkill",
	"pipe", "pipe2", "dup", "dup2", "dup3", "poll", "ppoll", "select", "pselect6",
	"exit", "exit_group", "restart_syscall",
	"rt_sigreturn", "rt_sigaction", "rt_sigprocmask", "rt_sigsuspend", "sigaltstack",
	"alarm", "setitimer", "getitimer",
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
	"getrandom", "sched_yield", "sched_getaffinity", "sched_get_priority_max",
	"sched_get_priority_min", "sched_getparam", "sched_getscheduler", "getcpu",
	"getpid", "gettid", "getppid", "getpgrp", "getuid", "geteuid", "getgid", "getegid",
	"getgroups", "uname", "sysinfo", "getrusage",
	/* gcc raises its soft stack limit; the hard limits hold without CAP_SYS_RESOURCE */
	"getrlimit", "setrlimit", "prlimit64",
};

/* Deny list for seccomp_deferred programs until they apply their profile: what no initialisation
 * needs and what would let the program (or anything it loads early) escape or see the host. */
static const char *const baseline_deny[] = {
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
	"move_mount", "open_tree", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "keyctl", "add_key", "request_key", "unshare", "setns",
	"acct", "swapon", "swapoff", "reboot", "syslog", "quotactl", "quotactl_fd", "lookup_dcookie",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "uselib", "ioperm", "iopl",
	"vhangup", "nfsservctl", "sysfs", "_sysctl",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"setfsuid", "setfsgid",
};

/* Never an extra: what the baseline denies (see there), and what the profiles allow only with
 * argument checks or the exec gate, or a twin that would get around those (creat, openat2). */
static const char *const reserved_checked[] = {
	"clone", "clone3", "execve", "execveat", "mmap", "mremap", "open", "openat", "openat2", "creat",
	"ioctl", "fcntl", "prctl", "arch_prctl", "kill", "tgkill", "tkill", "prlimit64", "setrlimit",
	"socket", "socketpair", "personality", "sendmsg", "recvmsg", "sendto", "recvfrom", "shutdown",
};

const char *sb_filter_reserved(const char *name)
{
	for (size_t i = 0; i < KG_ARRAY_LEN(baseline_deny); i++)
		if (!strcmp(name, baseline_deny[i]))
			return "denied to every sandbox";
	for (size_t i = 0; i < KG_ARRAY_LEN(reserved_checked); i++)
		if (!strcmp(name, reserved_checked[i]))
			return "it would void the profile's argument checks";
	return NULL;
}

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
	       const struct scmp_arg_cmp *cmp)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR)
		return 0; /* not on this architecture */
	return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

static int allow_all(scmp_filter_ctx ctx, const char *const *names, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = add(ctx, SCMP_ACT_ALLOW, names[i], 0, NULL);
	return rc;
}

/* allow `name` when argument `arg` (32 bits) equals one of vals */
static int allow_arg_in(scmp_filter_ctx ctx, const char *name, unsigned arg, const uint64_t *vals,
			size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct scmp_arg_cmp c = SCMP_CMP32(arg, SCMP_CMP_EQ, vals[i]);
		rc = add(ctx, SCMP_ACT_ALLOW, name, 1, &c);
	}
	return rc;
}

static scmp_filter_ctx new_ctx(uint32_t def)
{
	scmp_filter_ctx ctx = seccomp_init(def);
	if (!ctx)
		return NULL;
	/* int 0x80 and x32 calls would bypass a filter written for x86_64 numbers */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static int memory_rules(scmp_filter_ctx ctx, uint64_t mem, int watched, int notify, int map_calls_too)
{
	int rc;
	/* a longer mapping goes to the parent, which reports it as over the memory bound; watched,
	 * so does every MAP_FIXED one (it may land on a sealed range) and every mremap (it may move
	 * one), which the parent checks and lets through. Where memory is bounded every MAP_SHARED
	 * one goes there too: shared memory outlives the mapping that touched it (a part unmapped,
	 * MADV_DONTNEED), so the parent charges what it makes before it runs (memory.c). */
	struct scmp_arg_cmp c[2];
	unsigned n = 0;
	uint64_t routed = (watched ? MAP_FIXED : 0) | (mem && notify ? MAP_SHARED : 0);
	if (mem)
		c[n++] = SCMP_A1(SCMP_CMP_LE, mem);
	if (routed)
		c[n++] = SCMP_A3_64(SCMP_CMP_MASKED_EQ, routed, 0);
	if ((rc = add(ctx, SCMP_ACT_ALLOW, "mmap", n, n ? c : NULL)))
		return rc;
	for (size_t i = 0; i < KG_ARRAY_LEN(map_calls) && !watched && map_calls_too; i++)
		if ((rc = add(ctx, SCMP_ACT_ALLOW, map_calls[i], 0, NULL)))
			return rc;
	if (watched)
		return 0;
	struct scmp_arg_cmp newlen = SCMP_A2(SCMP_CMP_LE, mem);
	return add(ctx, SCMP_ACT_ALLOW, "mremap", mem ? 1 : 0, mem ? &newlen : NULL);
}

/* Signal handlers: any, except (watched) for the faults, which must end the process (a guard
 * page or a read-only input is not to be mapped away or stepped over by a handler of the program's
 * own), and for SIGCONT: the supervisor stops and resumes the process, which is not to learn when.
 * Queries (no new action) are always fine. */
static int signal_rules(scmp_filter_ctx ctx, int watched)
{
	if (!watched)
		return add(ctx, SCMP_ACT_ALLOW, "rt_sigaction", 0, NULL);
	struct scmp_arg_cmp query = SCMP_A1_64(SCMP_CMP_EQ, 0);
	int rc = add(ctx, SCMP_ACT_ALLOW, "rt_sigaction", 1, &query);
	for (int sig = 1; sig <= 64 && !rc; sig++) {
		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS ||
		    sig == SIGCONT)
			continue;
		struct scmp_arg_cmp c = SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)sig);
		rc = add(ctx, SCMP_ACT_ALLOW, "rt_sigaction", 1, &c);
	}
	return rc;
}

static int open_rules(scmp_filter_ctx ctx, int readonly)
{
	int rc;
	if (!readonly) {
		if ((rc = add(ctx, SCMP_ACT_ALLOW, "openat", 0, NULL)))
			return rc;
		return add(ctx, SCMP_ACT_ALLOW, "open", 0, NULL);
	}
	/* a writable /proc (a driver names its threads there) must not give /proc/self/mem for
	 * writing: once applied, files open for reading only */
	const uint64_t wr = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND;
	struct scmp_arg_cmp at = SCMP_A2_64(SCMP_CMP_MASKED_EQ, wr, 0);
	struct scmp_arg_cmp op = SCMP_A1_64(SCMP_CMP_MASKED_EQ, wr, 0);
	if ((rc = add(ctx, SCMP_ACT_ALLOW, "openat", 1, &at)) || (rc = add(ctx, SCMP_ACT_ALLOW, "open", 1, &op)))
		return rc;
	if (readonly != KG_SB_RO_OPENS_EACCES)
		return 0;
	/* a trusted process that only reads (a module's derivation under a GPU host's torch, whose
	 * libraries may open a device node or a cache read-write on their own): each write bit's open
	 * fails with EACCES, which the library handles, rather than ending the process */
	static const uint64_t bits[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND};
	for (size_t i = 0; i < KG_ARRAY_LEN(bits) && !rc; i++) {
		struct scmp_arg_cmp a2 = SCMP_A2_64(SCMP_CMP_MASKED_EQ, bits[i], bits[i]);
		struct scmp_arg_cmp a1 = SCMP_A1_64(SCMP_CMP_MASKED_EQ, bits[i], bits[i]);
		if (!(rc = add(ctx, SCMP_ACT_ERRNO(EACCES), "openat", 1, &a2)))
			rc = add(ctx, SCMP_ACT_ERRNO(EACCES), "open", 1, &a1);
	}
	return rc;
}

int sb_filter_profile(const struct sb_filter_params *fp, scmp_filter_ctx *out, kg_error *e)
{
	const struct sb_filter_desc *d = fp->desc;
	scmp_filter_ctx ctx = new_ctx(fp->notify ? SCMP_ACT_NOTIFY : SCMP_ACT_KILL_PROCESS);
	int rc = 0;
	if (!ctx)
		return kg_err(e, -ENOMEM, "seccomp: cannot create a filter");
	/* FIOCLEX and FIONCLEX are fcntl(F_SETFD) by another name (CPython sets close-on-exec so) */
	static const uint64_t tty_ioctls[] = {TCGETS, TIOCGWINSZ, FIONREAD, FIOCLEX, FIONCLEX};
	static const uint64_t fcntl_cmds[] = {F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD,
		F_DUPFD_CLOEXEC};
	static const uint64_t prctl_ops[] = {PR_SET_NAME, PR_GET_NAME};
	/* XCOMP: oneDNN (torch's convolutions) asks for the AMX tile state on CPUs that have it; a
	 * denial killed every conv module's process there. It only enlarges the thread's own state. */
	static const uint64_t arch_ops[] = {ARCH_SET_FS,	 ARCH_GET_FS,	      ARCH_CET_STATUS,
					    ARCH_GET_XCOMP_SUPP, ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM};
	/* glibc tries clone3 first and falls back to clone, whose flags a filter can see */
	if ((rc = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL)))
		goto out;
	/* watched needs someone to answer: without a listener its calls would be killed */
	int watched = d->watched && fp->notify && d->profile == KG_SB_PROFILE_RUN;
	/* the compile profile's list has the map calls and rt_sigaction */
	int run = d->profile == KG_SB_PROFILE_RUN;
	if ((run && (rc = signal_rules(ctx, watched))) || (rc = memory_rules(ctx, d->mem_bytes, watched, fp->notify, run)) ||
	    (rc = open_rules(ctx, d->readonly_opens)))
		goto out;
	if ((rc = allow_arg_in(ctx, "ioctl", 1, tty_ioctls, KG_ARRAY_LEN(tty_ioctls))) ||
	    (rc = allow_arg_in(ctx, "prctl", 0, prctl_ops, KG_ARRAY_LEN(prctl_ops))) ||
	    (rc = allow_arg_in(ctx, "arch_prctl", 0, arch_ops, KG_ARRAY_LEN(arch_ops))))
		goto out;
	/* the control channel (handed fds) and the notify socket, nothing else (no socket() anyway) */
	static const char *const msg_calls[] = {"sendmsg", "recvmsg", "sendto", "recvfrom", "shutdown"};
	for (size_t i = 0; i < KG_ARRAY_LEN(msg_calls) && !rc; i++) {
		struct scmp_arg_cmp c = SCMP_A0_32(SCMP_CMP_LT, (uint32_t)fp->fd_limit);
		rc = add(ctx, SCMP_ACT_ALLOW, msg_calls[i], 1, &c);
		for (int j = 0; j < fp->n_msg_fds && !rc; j++) {
			struct scmp_arg_cmp eq = SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)fp->msg_fds[j]);
			rc = add(ctx, SCMP_ACT_ALLOW, msg_calls[i], 1, &eq);
		}
	}
	for (int i = 0; i < d->n_syscalls && !rc; i++)
		rc = add(ctx, SCMP_ACT_ALLOW, d->syscalls[i], 0, NULL);
	/* a driver's fds, whatever the profile */
	for (int i = 0; i < fp->n_ioctl_fds && !rc; i++) {
		struct scmp_arg_cmp c = SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)fp->ioctl_fds[i]);
		rc = add(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &c);
	}
	if (rc)
		goto out;

	if (d->profile == KG_SB_PROFILE_COMPILE) {
		if ((rc = allow_all(ctx, compile_allow, KG_ARRAY_LEN(compile_allow))))
			goto out;
		/* build tools also lock files (ccache, make -j) and size their pipes */
		static const uint64_t compile_fcntl[] = {F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD,
			F_DUPFD_CLOEXEC, F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW,
			F_GETPIPE_SZ, F_SETPIPE_SZ};
		if ((rc = allow_arg_in(ctx, "fcntl", 1, compile_fcntl, KG_ARRAY_LEN(compile_fcntl))))
			goto out;
		struct scmp_arg_cmp nons = SCMP_A0_64(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0);
		rc = add(ctx, SCMP_ACT_ALLOW, "clone", 1, &nons);
		goto out;
	}

	if ((rc = allow_all(ctx, run_allow, KG_ARRAY_LEN(run_allow))) ||
	    (rc = allow_arg_in(ctx, "fcntl", 1, fcntl_cmds, KG_ARRAY_LEN(fcntl_cmds))))
		goto out;
	/* A program may seal a thread of its own further (kg_sb_seal_calls): new filters and Landlock
	 * domains only ever take rights away, and a filter with a listener is refused (the chain has
	 * one). SECCOMP_SET_MODE_FILTER, GET_ACTION_AVAIL, GET_NOTIF_SIZES; never strict mode. */
	static const uint64_t seccomp_ops[] = {1, 2, 3};
	static const char *const landlock_calls[] = {"landlock_create_ruleset", "landlock_add_rule",
		"landlock_restrict_self"};
	/* watched: filters go to the supervisor, which lets the program's own through until it is
	 * distrusted */
	if ((!watched && (rc = allow_arg_in(ctx, "seccomp", 0, seccomp_ops, KG_ARRAY_LEN(seccomp_ops)))) ||
	    (rc = allow_all(ctx, landlock_calls, KG_ARRAY_LEN(landlock_calls))))
		goto out;
	/* rlimits may be read, never set (raising is the point of a call) */
	struct scmp_arg_cmp getonly = SCMP_A2_64(SCMP_CMP_EQ, 0);
	if ((rc = add(ctx, SCMP_ACT_ALLOW, "prlimit64", 1, &getonly)))
		goto out;
	if (fp->self_pid > 0) {
		/* raise() and abort() on itself; nobody else */
		struct scmp_arg_cmp self = SCMP_A0_32(SCMP_CMP_EQ, (uint32_t)fp->self_pid);
		if ((rc = add(ctx, SCMP_ACT_ALLOW, "kill", 1, &self)) ||
		    (rc = add(ctx, SCMP_ACT_ALLOW, "tgkill", 1, &self)))
			goto out;
	}
	if (d->allow_threads) {
		struct scmp_arg_cmp thr = SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD | NS_FLAGS, CLONE_THREAD);
		if ((rc = add(ctx, SCMP_ACT_ALLOW, "clone", 1, &thr)))
			goto out;
	}
	if (fp->exec_gate) {
		/* one execve, of the program itself: its path sits at an address only the filter and
		 * the exec'ing child know, and that address is gone once the new image runs */
		struct scmp_arg_cmp gate = SCMP_A0_64(SCMP_CMP_EQ, fp->exec_gate);
		if ((rc = add(ctx, SCMP_ACT_ALLOW, "execve", 1, &gate)))
			goto out;
	}
out:
	if (rc) {
		seccomp_release(ctx);
		return kg_err(e, rc, "seccomp: building the %s filter: %s", kg_sb_profile_name(d->profile),
			      strerror(-rc));
	}
	*out = ctx;
	return 0;
}

/* The kernel allows one notification listener per filter chain, and the one that matters is that
 * of the profile the program applies later. Until then the baseline's denials fail with ENOSYS
 * (RET_TRACE without a tracer), and afterwards they never outrank the profile's USER_NOTIF for the
 * same call (KILL, TRAP or ERRNO would, and the report would lose the name, or worse, the call
 * would just fail). Every call denied here is denied by every profile too. Without notification
 * support both filters kill. */
int sb_filter_baseline(int notify, scmp_filter_ctx *out, kg_error *e)
{
	scmp_filter_ctx ctx = new_ctx(SCMP_ACT_ALLOW);
	uint32_t deny = notify ? SCMP_ACT_TRACE(0) : SCMP_ACT_KILL_PROCESS;
	int rc;
	if (!ctx)
		return kg_err(e, -ENOMEM, "seccomp: cannot create a filter");
	for (size_t i = 0; i < KG_ARRAY_LEN(baseline_deny); i++)
		if ((rc = add(ctx, deny, baseline_deny[i], 0, NULL)))
			goto out;
	/* AF_UNIX stays (drivers talk to local daemons); every other family is network */
	struct scmp_arg_cmp inet = SCMP_A0_32(SCMP_CMP_NE, AF_UNIX);
	if ((rc = add(ctx, deny, "socket", 1, &inet)) || (rc = add(ctx, deny, "socketpair", 1, &inet)))
		goto out;
	/* personality(0xffffffff) only reads it (sanitizer runtimes do) */
	struct scmp_arg_cmp pers = SCMP_A0_32(SCMP_CMP_NE, 0xffffffffu);
	if ((rc = add(ctx, deny, "personality", 1, &pers)))
		goto out;
	for (unsigned bit = 0; bit < 64; bit++) {
		if (!(NS_FLAGS & (1ull << bit)))
			continue;
		struct scmp_arg_cmp ns = SCMP_A0_64(SCMP_CMP_MASKED_EQ, 1ull << bit, 1ull << bit);
		if ((rc = add(ctx, deny, "clone", 1, &ns)))
			goto out;
	}
	rc = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
out:
	if (rc) {
		seccomp_release(ctx);
		return kg_err(e, rc, "seccomp: building the baseline filter: %s", strerror(-rc));
	}
	*out = ctx;
	return 0;
}

int sb_filter_export(scmp_filter_ctx ctx, int memfd, uint32_t *len, kg_error *e)
{
	int rc;
	if (ftruncate(memfd, 0) || lseek(memfd, 0, SEEK_SET))
		return kg_err(e, -errno, "seccomp: memfd: %s", strerror(errno));
	if ((rc = seccomp_export_bpf(ctx, memfd)))
		return kg_err(e, rc, "seccomp: exporting the filter: %s", strerror(-rc));
	off_t end = lseek(memfd, 0, SEEK_CUR);
	if (end <= 0)
		return kg_err(e, -EIO, "seccomp: empty filter");
	*len = (uint32_t)end;
	return 0;
}

int sb_notify_supported(void)
{
	/* the tests' way to exercise the killing fallback of older kernels */
	const char *off = getenv("KGATE_NO_SECCOMP_NOTIFY");
	if (off && *off && strcmp(off, "0"))
		return 0;
	/* API level 6: USER_NOTIF together with TSYNC (kernel 5.7 and libseccomp 2.5) */
	static int level = -1;
	if (level < 0)
		__atomic_store_n(&level, (int)seccomp_api_get(), __ATOMIC_RELAXED);
	return level >= 6;
}

int sb_send_fd(int sock, int fd)
{
	char one = 'L';
	struct iovec iov = {.iov_base = &one, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n == 1)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? -errno : -EIO;
	}
}

int sb_recv_fd(int sock)
{
	char one;
	struct iovec iov = {.iov_base = &one, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	int fd = -EBADMSG;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len != CMSG_LEN(sizeof(int)))
			continue;
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		if (fd >= 0)
			close(fd);
		return -EBADMSG;
	}
	return fd;
}
