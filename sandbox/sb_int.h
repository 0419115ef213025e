/* Internal glue between the files of the sandbox room: the spawn plan the parent prepares and the
 * child executes, the messages they exchange, the per-layer helpers, and the parent's record of a
 * child that spawn, supervise and outcome share. Not part of the API.
 * Rule for everything the child runs: no allocation (the parent may be multi-threaded, and a raw
 * clone does not reset malloc's locks), only system calls on memory the parent prepared. */
#ifndef KG_SB_INT_H
#define KG_SB_INT_H

#include <limits.h>
#include <sys/resource.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include <seccomp.h>

#include "sandbox.h"

/* The outer ids the child becomes when kgate runs as root (nobody/nogroup, like minijail). */
#define SB_OUTER_ID 65534u
#define SB_MAX_FDS 64
#define SB_MAX_LISTENERS 4
#define SB_MAX_SEALED 256

enum sb_mnt_kind {
	SB_MNT_BIND, /* host src at dst: read-only unless RW, noexec unless EXEC */
	SB_MNT_SYMLINK, /* dst -> src (merged-/usr hosts: /lib -> usr/lib) */
	SB_MNT_TMPFS, /* private tmpfs of `size` bytes */
	SB_MNT_PROC, /* fresh procfs of the child's pid namespace, read-only unless RW */
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
	int sanitize; /* ASan build or KGATE_SANITIZE=1: no RLIMIT_AS, /proc at least read-only */
	int host_root; /* kgate runs as root: the child ends up as SB_OUTER_ID */
	pid_t parent_pid;
	struct kg_sb_limits lim; /* defaults resolved; mem_bytes 0 here means unbounded */

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

/* memory.c (parent): the supervisor's own account of the tree's memory where no cgroup bounds it.
 * Counted: every process's private anonymous pages (resident and swapped) and page tables, and
 * each shared-memory object of the kernel's shmem mount (shared anonymous mappings, /dev/zero
 * mapped shared, memfds, SysV segments) once, however many mappings and processes hold it, at the
 * most it was ever seen to hold while it lives: its mapped extent, its allocated blocks where those
 * can be read, and the length it was created with (a shared mmap reaches the supervisor first). The
 * objects the caller handed over (spec fds: the arena) are the caller's; files and device memory
 * (a GPU driver's mappings) are not counted. */
#define SB_MEM_MAX_PROCS 256
#define SB_MEM_MAX_PENDING 64
struct sb_mem_obj {
	uint64_t dev, ino;
	uint64_t charge; /* bytes: the most this object was seen to hold; kept while it lives */
};
struct sb_mem_pend {
	uint64_t len, ns; /* a shared mmap let through, and when */
};
struct sb_mem {
	int on; /* bounded, no cgroup memory.max, not a sanitizer build */
	uint64_t bound;
	uint64_t shm_dev; /* st_dev of the kernel's shmem mount; 0 when it could not be learnt */
	pid_t session; /* every process of the tree is in the session the child made (setsid) */
	pid_t skip; /* the pid-ns init: it shares the caller's memory */
	int n_handed;
	struct {
		uint64_t dev, ino;
	} handed[SB_MAX_FDS + 1];
	int n_procs;
	pid_t procs[SB_MEM_MAX_PROCS];
	int scanned; /* a full scan ran at least once */
	int map_files; /* /proc/PID/map_files readable (CAP_SYS_ADMIN): 1 yes, -1 no, 0 not tried */
	uint64_t anon; /* last sample: private anonymous (resident, swapped) and page tables */
	uint64_t shm_rss, shm_rss_scanned; /* RssShmem now, and at the last full scan */
	struct sb_mem_obj *objs;
	int n_objs;
	struct sb_mem_pend pend[SB_MEM_MAX_PENDING]; /* shared mmaps no scan has matched to an object yet */
	int n_pend;
	uint64_t next_light_ns, next_full_ns;
	uint64_t peak;
};
struct kg_sb_child;
void sb_mem_init(struct kg_sb_child *c, const struct kg_sb_spec *s);
void sb_mem_free(struct sb_mem *m);
/* The next moment a sample is due (UINT64_MAX when none is). */
uint64_t sb_mem_due_ns(const struct kg_sb_child *c);
/* One sample (a full scan when one is due or the figure needs checking); stopped: every process of
 * the tree is held still. Over the bound: ends the tree as KG_SB_END_MEMORY and returns 1. */
int sb_mem_sample(struct kg_sb_child *c, int stopped);
/* A shared mmap of len bytes by task tid, on fd (unused for anonymous ones), before it runs:
 * charged where it makes shared memory; returns 1 when it would take the tree over the bound
 * (the tree has then been ended as KG_SB_END_MEMORY). */
int sb_mem_shared_mmap(struct kg_sb_child *c, pid_t tid, uint64_t len, uint64_t flags, int fd);

/* The filter a spec describes (filterdesc.c), and its text form in KG_SB_ENV_FILTER:
 *   <profile>;threads=<0|1>;mem=<none|bytes>;ro_opens=<0|1>;watched=<0|1>;syscalls=<name>[,<name>]...
 * Every field present, in this order, nothing else; mem is decimal without leading zeros. */
#define SB_FILTER_MAX_NAMES 64
#define SB_FILTER_NAME_LEN 40 /* with room: the longest x86_64 name has 23 characters */
#define SB_FILTER_DESC_MAX (96 + SB_FILTER_MAX_NAMES * SB_FILTER_NAME_LEN)
struct sb_filter_desc {
	enum kg_sb_profile profile;
	int allow_threads;
	int readonly_opens;
	uint64_t mem_bytes; /* 0: no mmap/mremap length rule */
	int watched; /* memory-map changes and seccomp() go to the supervisor (kg_sb_spec.watched) */
	int n_syscalls;
	char syscalls[SB_FILTER_MAX_NAMES][SB_FILTER_NAME_LEN];
};
/* Copies NULL-ended extra names into d after checking them (syntax, count, sb_filter_reserved). */
int sb_filter_desc_names(struct sb_filter_desc *d, const char *const *names, kg_error *e);
/* Returns the length written, or -EINVAL / -ENAMETOOLONG. */
int sb_filter_desc_format(const struct sb_filter_desc *d, char *out, size_t n);
/* 0, or -EINVAL for anything but a string sb_filter_desc_format could have written. */
int sb_filter_desc_parse(const char *s, struct sb_filter_desc *d);

/* seccomp.c */
struct sb_filter_params {
	const struct sb_filter_desc *desc; /* profile, threads, mmap bound, opens, extra names */
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
/* Why name may not be an extra: NULL when it may. The calls the baseline denies stay denied, and
 * the ones a profile allows only by their arguments keep those checks. */
const char *sb_filter_reserved(const char *name);
int sb_filter_baseline(int notify, scmp_filter_ctx *out, kg_error *e);
int sb_filter_export(scmp_filter_ctx ctx, int memfd, uint32_t *len, kg_error *e);
/* USER_NOTIF usable together with TSYNC (kernel and libseccomp) */
int sb_notify_supported(void);
/* SCM_RIGHTS over the notify socket; async-signal-safe (the child uses it) */
int sb_send_fd(int sock, int fd);
int sb_recv_fd(int sock);

/* ---- the parent's side of one child: spawn.c, supervise.c, outcome.c ---- */

struct kg_sb_child {
	struct sb_plan plan;
	char name[48]; /* the spec's name for its filter, in denials */
	pid_t pid;
	int pidfd, err_r, out_r, notify_p, status_r, devnull_w;
	/* our copies of the child's ends; the plan gets the numbers at clone time and is shared
	 * with the child (CLONE_VM), so it is never written to afterwards */
	struct {
		int err_w, sync_r, out_w, notify_c, status_w, bpf_fd, stdin_fd;
	} ce;
	int listeners[SB_MAX_LISTENERS];
	int n_listeners;
	int had_listener; /* denials were named: an unnamed SIGSYS came from a stacked killing filter */
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
	char env_filter[sizeof(KG_SB_ENV_FILTER) + SB_FILTER_DESC_MAX];
	char env_mseal[40], env_seal[sizeof(KG_SB_ENV_SEAL) + 512];
	struct kg_sb_outcome oc;
	/* kg_sb_distrust: from then on a watched program's filters and its calls over these ranges
	 * are refused (supervise.c) */
	int watched; /* the program's filter sends map changes and filters here (kg_sb_spec.watched) */
	int distrusted;
	int n_sealed;
	struct kg_sb_range sealed[SB_MAX_SEALED];
	struct sb_mem mem;
};

static inline void sb_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* supervise.c */
void sb_kill_tree(struct kg_sb_child *c);
/* Records why the child is ending; the first reason wins, and a child that exited keeps its exit. */
void sb_set_why(struct kg_sb_child *c, enum kg_sb_end why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void sb_drain_output(struct kg_sb_child *c);
void sb_drop_listener(struct kg_sb_child *c, int i);
int sb_ms_until(uint64_t now, uint64_t t);
/* One poll over the caller's fd and extra (either may be -1) and the sandbox's own fds, servicing
 * the latter; returns their revents through the pointers, < 0 on poll errors. */
int sb_poll_once(struct kg_sb_child *c, int fd, int extra, int timeout_ms, short *fd_ev, short *extra_ev,
		 short *exit_ev);

/* outcome.c */
void sb_reap(struct kg_sb_child *c);

/* spawn.c */
void sb_unmap_exec_gate(struct sb_plan *p);

/* spawn.c, inside_seal.c and landlock.c: the mseal layer and what a sealed program may still open */
#define SB_SEAL_MAX_PATHS 16
struct sb_seal_path {
	const char *path;
	int rw;
};
/* 0 where mseal(2) exists, else -errno (ENOSYS). */
int sb_mseal_probe(void);
/* The spec's sealed_opens as KG_SB_ENV_SEAL's value ("rw:/dev,r:/sys"); its length or -errno. */
int sb_seal_env_format(const char *const *paths, char *out, size_t n);
/* Stacks a Landlock domain that handles every file right and grants only paths (read, or read and
 * write); -ENOSYS without Landlock. Affects the calling thread and those it starts later. */
int sb_landlock_restrict_paths(const struct sb_seal_path *paths, int n);

#endif
