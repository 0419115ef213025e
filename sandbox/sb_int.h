/* Internal glue between the files of the sandbox room: the spawn plan the parent prepares and the
 * child executes, the messages they exchange, and the per-layer helpers. Not part of the API.
 * Rule for everything the child runs: no allocation (the parent may be multi-threaded, and a raw
 * clone does not reset malloc's locks), only system calls on memory the parent prepared. */
#ifndef KG_SB_INT_H
#define KG_SB_INT_H

#include <limits.h>
#include <sys/resource.h>
#include <stdint.h>
#include <sys/types.h>

#include <seccomp.h>

#include "sandbox.h"

/* The outer ids the child becomes when kgate runs as root (nobody/nogroup, like minijail). */
#define SB_OUTER_ID 65534u
#define SB_MAX_FDS 64
#define SB_MAX_LISTENERS 4

enum sb_mnt_kind {
	SB_MNT_BIND, /* host src at dst: read-only unless RW, noexec unless EXEC */
	SB_MNT_SYMLINK, /* dst -> src (merged-/usr hosts: /lib -> usr/lib) */
	SB_MNT_TMPFS, /* private tmpfs of `size` bytes */
	SB_MNT_PROC, /* fresh procfs of the child's pid namespace, read-only */
};

struct sb_mnt {
	enum sb_mnt_kind kind;
	char *src;
	char *dst;
	unsigned flags; /* KG_SB_PATH_* */
	uint64_t size;
	unsigned mode;
	int system; /* part of the profile, not a spec path */
	int remapped; /* spec path seen elsewhere inside than on the host */
	/* filled in by the child */
	int srcfd;
	int is_dir;
	int skipped;
};

struct sb_plan {
	enum kg_sb_profile profile;
	unsigned required, disabled;
	int deferred, allow_threads;
	int sanitize; /* ASan build or KGATE_SANITIZE=1: no RLIMIT_AS, /proc for run-cpu */
	int host_root; /* kgate runs as root: the child ends up as SB_OUTER_ID */
	pid_t parent_pid;
	struct kg_sb_limits lim; /* defaults resolved */

	struct sb_mnt *mnts;
	int n_mnts, cap_mnts;

	void *nocaps; /* cap_t of the empty set, allocated by the parent for the child */
	void *initcaps; /* cap_t: only the marker capability init keeps (see child.c) */
	void *stacks; /* one mapping: guard, the clone's stack, guard, pid 2's stack */
	void *stack1, *stack2;
	size_t stack_sz;
	const char *exec_path;
	char *const *argv;
	char **envp; /* owned: spec->envp plus the KGATE_SB_* entries */
	const char *cwd;
	uint64_t exec_gate; /* run profiles, not deferred: execve allowed only on this address */

	/* fds as numbered in the parent at clone time; the child renumbers them */
	int err_w, sync_r, out_w, notify_c, status_w, bpf_fd, stdin_fd;
	int fds[SB_MAX_FDS];
	int n_fds;
};

/* Layout of the child's fd table after the shuffle (3 + n_fds is the first slot after the handed
 * fds). Slots after the notify socket are CLOEXEC and vanish at execve. */
#define SB_SLOT_NOTIFY(n) (3 + (n))
#define SB_SLOT_ERR(n) (4 + (n))
#define SB_SLOT_STATUS(n) (5 + (n))
#define SB_SLOT_BPF(n) (6 + (n))
#define SB_SLOT_END(n) (7 + (n))

/* parent -> child once the uid maps and the cgroup are in place */
struct sb_sync {
	unsigned active, failed;
	uint32_t bpf_len; /* bytes of struct sock_filter in the memfd; 0 = no filter */
	int32_t notify; /* the filter's default action is USER_NOTIF: pass the listener back */
};

/* child -> parent over the CLOEXEC error pipe; EOF after a REPORT means execve succeeded */
enum { SB_MSG_REPORT = 1, SB_MSG_FAIL = 2 };
struct sb_msg {
	int32_t kind;
	int32_t err; /* positive errno for FAIL */
	unsigned active, failed;
	int32_t layer; /* FAIL of a required layer: its bit, else 0 */
	char step[48];
	char what[256];
	char notes[400];
};

/* child.c: runs in the cloned child, never returns */
_Noreturn void sb_child_main(struct sb_plan *p);

/* init -> parent when the program ends */
struct sb_exit {
	int status;
	struct rusage ru;
};

/* names.c */
const char *sb_signame(int sig, char *buf, size_t n);

/* mounts.c: the parent plans, the child opens the sources (before it changes identity) and builds
 * the new root on a tmpfs, then pivots into it. */
int sb_mounts_plan(struct sb_plan *p, const struct kg_sb_spec *s, kg_error *e);
void sb_mounts_free(struct sb_plan *p);
int sb_mounts_open_sources(struct sb_plan *p, const char **what);
int sb_mounts_build(struct sb_plan *p, const char **what, char *notes, size_t notes_sz);

/* landlock.c (child): rules from the plan, by ABI; returns the ABI used or -errno. */
int sb_landlock_apply(const struct sb_plan *p, int in_mountns, char *notes, size_t notes_sz);

/* cgroup.c (parent) */
struct sb_cgroup {
	char path[PATH_MAX];
	int active;
};
int sb_cgroup_create(struct sb_cgroup *cg, uint64_t mem_bytes, uint32_t pids, char *why, size_t n);
int sb_cgroup_attach(struct sb_cgroup *cg, pid_t pid);
long sb_cgroup_oom_kills(const struct sb_cgroup *cg);
void sb_cgroup_kill(const struct sb_cgroup *cg);
void sb_cgroup_destroy(struct sb_cgroup *cg);

/* seccomp.c */
struct sb_filter_params {
	enum kg_sb_profile profile;
	int allow_threads;
	uint64_t mem_bytes; /* 0: no mmap/mremap length rule */
	const int *ioctl_fds;
	int n_ioctl_fds;
	int fd_limit; /* sendmsg/recvmsg and friends only on fds below this (handed fds + notify) */
	const int *msg_fds; /* ...and on these (a tool's channels the program inherited) */
	int n_msg_fds;
	pid_t self_pid; /* kill/tgkill only to this pid (as the program sees itself); 0: none */
	uint64_t exec_gate; /* nonzero: execve only with this pathname pointer */
	int notify; /* default action USER_NOTIF (else KILL_PROCESS) */
};
int sb_filter_profile(const struct sb_filter_params *fp, scmp_filter_ctx *out, kg_error *e);
int sb_filter_baseline(int notify, scmp_filter_ctx *out, kg_error *e);
int sb_filter_export(scmp_filter_ctx ctx, int memfd, uint32_t *len, kg_error *e);
/* USER_NOTIF usable together with TSYNC (kernel and libseccomp) */
int sb_notify_supported(void);
/* SCM_RIGHTS over the notify socket; async-signal-safe (the child uses it) */
int sb_send_fd(int sock, int fd);
int sb_recv_fd(int sock);

#endif
