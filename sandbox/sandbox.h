/* sandbox: runs one untrusted program in a child process behind namespaces, Landlock, seccomp,
 * dropped capabilities and limits, and reports how it ended. It knows nothing of kernels or
 * tensors: the verifier hands it an argv, fds and paths; it hands back a structured outcome. */
#ifndef KG_SANDBOX_H
#define KG_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kg_common.h"

/* The two shapes of sandbox. What a particular program needs beyond its profile (device nodes,
 * /proc and /sys, a few more system calls) is data in its spec, never a profile of its own: the
 * sandbox knows no driver by name. */
enum kg_sb_profile {
	KG_SB_PROFILE_COMPILE, /* may exec the toolchain and fork; no network; writes only scratch */
	KG_SB_PROFILE_RUN, /* one process (threads if allowed), no exec after start, no network */
};
const char *kg_sb_profile_name(enum kg_sb_profile p);
int kg_sb_profile_parse(const char *name, enum kg_sb_profile *out);

/* /proc inside the sandbox. */
enum kg_sb_proc {
	KG_SB_PROC_DEFAULT = 0, /* compile: read-only; run: none (sanitizer builds: read-only) */
	KG_SB_PROC_NONE,
	KG_SB_PROC_RO,
	/* writable: a driver names its threads through /proc/self/task/TID/comm. Pair it with
	 * readonly_opens, or /proc/self/mem opens for writing. */
	KG_SB_PROC_RW,
};

/* Isolation layers, as a bitmask. Spawn brings up every layer it can; `required` ones that fail
 * make the spawn fail (KG_SB_END_SETUP), the others are recorded in layers_failed. */
enum {
	KG_SB_LAYER_USERNS = 1u << 0,
	KG_SB_LAYER_MOUNTNS = 1u << 1,
	KG_SB_LAYER_PIDNS = 1u << 2,
	KG_SB_LAYER_NETNS = 1u << 3,
	KG_SB_LAYER_IPCNS = 1u << 4,
	KG_SB_LAYER_UTSNS = 1u << 5,
	KG_SB_LAYER_NO_NEW_PRIVS = 1u << 6,
	KG_SB_LAYER_CAPS = 1u << 7,
	KG_SB_LAYER_RLIMITS = 1u << 8,
	KG_SB_LAYER_CGROUP = 1u << 9,
	KG_SB_LAYER_LANDLOCK = 1u << 10,
	KG_SB_LAYER_SECCOMP = 1u << 11,
	/* mseal(2) exists (Linux >= 6.10): a program that seals its own memory (kg_sb_seal_memory,
	 * kg_sb_seal_image) gets pages that not even its own mprotect can reopen */
	KG_SB_LAYER_MSEAL = 1u << 12,
	KG_SB_LAYER_COUNT_ = 13,
};
const char *kg_sb_layer_name(unsigned bit);
/* "userns,mountns,..." for a mask; returns out. */
char *kg_sb_layers_str(unsigned mask, char *out, size_t outsz);
/* Parses one layer name ("landlock"); 0 when unknown. */
unsigned kg_sb_layer_parse(const char *name);

#define KG_SB_MEM_UNBOUNDED UINT64_MAX
/* kg_sb_spec.readonly_opens: a write open fails with EACCES rather than ending the process */
#define KG_SB_RO_OPENS_EACCES 2

struct kg_sb_limits {
	double wall_s; /* watchdog: the whole process group is killed after this; 0 = 60 s */
	uint32_t cpu_s; /* RLIMIT_CPU; 0 = derived from wall_s */
	uint64_t mem_bytes; /* RLIMIT_AS, cgroup memory.max (else the supervisor's own count of the
	                     * tree's private and shared memory, memory.c), and the bound that a
	                     * single mmap/mremap may not exceed; over it: KG_SB_END_MEMORY; 0 = 8 GiB;
	                     * KG_SB_MEM_UNBOUNDED = none (a GPU driver reserves terabytes of
	                     * address space: its memory is bounded by the device, not here) */
	uint32_t nproc; /* RLIMIT_NPROC and cgroup pids.max; 0 = profile default (compile 256, run 64
	                 * with threads, else 1) */
	uint32_t nofile; /* RLIMIT_NOFILE; 0 = 64 */
	uint64_t fsize; /* RLIMIT_FSIZE; 0 = 64 MiB */
	uint64_t tmpfs_bytes; /* size of the private /tmp; 0 = 64 MiB */
	size_t output_keep; /* bytes of stdout+stderr kept for the report; 0 = 64 KiB */
	uint64_t output_max; /* total output after which the child is killed (output_limit); 0 = 64 MiB */
	int address_space_unbounded; /* no RLIMIT_AS, while mem_bytes still bounds each mmap/mremap and
	                              * the cgroup: a GPU driver reserves terabytes of virtual address
	                              * space that it never backs */
	int data_bounded; /* with address_space_unbounded: RLIMIT_DATA = mem_bytes, which counts the heap
	                   * and private writable mappings, not PROT_NONE reservations nor shared
	                   * memory (an interpreter's reservations are the former, its data the latter) */
};

enum {
	KG_SB_PATH_RW = 1u << 0, /* writable (scratch); otherwise read-only */
	KG_SB_PATH_EXEC = 1u << 1, /* may be executed / mapped executable */
	KG_SB_PATH_DEV = 1u << 2, /* a device node (bind-mounted, read-write) */
	KG_SB_PATH_OPTIONAL = 1u << 3, /* skip silently when absent on the host */
};

/* A host path made visible inside the sandbox (bind mount, plus a Landlock rule). */
struct kg_sb_path {
	const char *host;
	const char *inside; /* NULL: same path inside */
	unsigned flags;
};

struct kg_sb_spec {
	enum kg_sb_profile profile;
	const char *name; /* names this sandbox in denials and in doctor ("run-cuda"); NULL: the
	                   * profile's name */
	const char *const *argv; /* argv[0]: absolute path as seen inside the sandbox */
	const char *const *envp; /* complete environment; NULL = empty */
	const char *cwd; /* inside; NULL = "/tmp" */
	const int *fds; /* handed over: fds[i] becomes fd 3+i in the child; all others are closed */
	int n_fds;
	const struct kg_sb_path *paths; /* added to the profile's own system paths */
	int n_paths;
	struct kg_sb_limits limits;
	unsigned required; /* layers that must come up */
	unsigned disabled; /* layers not to attempt (tests, and hosts that forbid them) */
	/* 0: spawn applies the profile's seccomp filter right before execve.
	 * 1: spawn applies only a baseline deny filter; the program initialises (CUDA context, buffers)
	 *    and then calls kg_sb_seccomp_apply() itself, before it loads anything untrusted. */
	int seccomp_deferred;
	int allow_threads; /* run profiles: clone of threads allowed in the filter */
	int stdin_fd; /* -1: /dev/null */
	/* What this program needs beyond its profile, as data (bubblewrap's --dev-bind, minijail's
	 * policy files). The filter a deferred program applies gets the same extras (see
	 * kg_sb_seccomp_apply). */
	const char *const *devices; /* NULL-ended glob(3) patterns of device nodes, or directories of
	                             * them, bound read-write where present ("/dev/nvidia*") */
	enum kg_sb_proc proc;
	int sys_ro; /* /sys, read-only */
	const char *const *syscalls; /* NULL-ended names added to the profile's allowlist */
	int readonly_opens; /* open/openat only without write access, creation or truncation: 1, a write
			     * open ends the process; KG_SB_RO_OPENS_EACCES, it fails with EACCES */
	/* What a program may still open after it sealed itself (kg_sb_seal_calls): NULL-ended
	 * "r:/path" (read) or "rw:/path" (read, write, device ioctl) entries, a driver's needs. NULL:
	 * nothing, and an open after the seal kills the program. */
	const char *const *sealed_opens;
	/* Run profiles with seccomp_deferred: memory-map changes (mprotect, munmap, mremap, madvise,
	 * mmap with MAP_FIXED) and seccomp() go to the supervisor, which lets them through until the
	 * caller distrusts the program (kg_sb_distrust) and from then on refuses and names those that
	 * touch a sealed range, and every filter stacked; a handler for a fault signal (SEGV, BUS,
	 * ILL, FPE, TRAP, SYS) or for SIGCONT (the caller stops and resumes it) is never allowed. For a
	 * program that hosts untrusted code. */
	int watched;
};

/* How a sandboxed program ended. The sandbox says what happened; what it means for a verdict is
 * the caller's to name. */
enum kg_sb_end {
	KG_SB_END_RUNNING = 0,
	KG_SB_END_EXIT, /* exited by itself: exit_code */
	KG_SB_END_SIGNAL, /* killed by a signal it raised or caused: signo */
	KG_SB_END_TIMEOUT, /* the watchdog or the caller's deadline */
	KG_SB_END_SYSCALL, /* a denied system call: syscall names it */
	KG_SB_END_MEMORY, /* over the memory bound */
	KG_SB_END_OUTPUT_LIMIT, /* printed more than output_max */
	KG_SB_END_SETUP, /* a required layer could not be set up */
	KG_SB_END_KILLED, /* the caller killed it for its own reasons */
	/* a distrusted, watched program stacked a filter or touched a sealed range (detail says
	 * which call, on what) */
	KG_SB_END_TAMPER,
};
/* A stable one-word name for an end ("timeout", "syscall"), for logs and tests. */
const char *kg_sb_end_name(enum kg_sb_end end);

struct kg_sb_outcome {
	enum kg_sb_end end;
	int exit_code;
	int signo;
	int syscall_nr; /* -1 when not known */
	char syscall[48]; /* name of the denied call, "" when not known */
	char detail[512]; /* for a human: "socket(AF_INET, ...) denied", "mmap of 30 GiB > 4 GiB" */
	unsigned layers_active;
	unsigned layers_failed;
	const char *output; /* first output_keep bytes of stdout+stderr, NUL-terminated; owned by child */
	size_t output_len;
	uint64_t output_total; /* all bytes the child wrote, kept or not */
	double wall_s;
	long maxrss_kb;
	/* the most memory the supervisor counted for the whole tree (private anonymous pages, swap,
	 * page tables, and each shared-memory object once), in bytes; 0 where it did not count (a
	 * cgroup's memory.max bounds the tree, or nothing does) */
	uint64_t mem_peak;
	/* a notification listener was in place: a denial that the sandbox could not name (a SIGSYS
	 * with an empty syscall) came from a filter the program stacked itself (kg_sb_seal_calls) */
	int denials_named;
};

struct kg_sb_child;

/* Environment a program spawned with seccomp_deferred = 1 finds (kg_sb_seccomp_apply reads it):
 * the fd of the socket the seccomp listener goes back over (3 + n_fds), n_fds, and the filter its
 * spec describes (profile, threads, memory bound, extra syscalls, read-only opens), so that the
 * program applies exactly what its spawner asked for without being told twice. */
#define KG_SB_ENV_NOTIFY_FD "KGATE_SB_NOTIFY_FD"
#define KG_SB_ENV_NFDS "KGATE_SB_NFDS"
#define KG_SB_ENV_FILTER "KGATE_SB_FILTER"
/* "1" when the mseal layer is active: the program's seals must then hold (kg_sb_seal_*). */
#define KG_SB_ENV_MSEAL "KGATE_SB_MSEAL"
/* The spec's sealed_opens, comma-separated ("rw:/dev,r:/sys"); empty: nothing. */
#define KG_SB_ENV_SEAL "KGATE_SB_SEAL"

/* Starts the program. On success *out owns the child; it is running. When a required layer fails,
 * returns -EPERM with the layer named in e and nothing is left running; other setup failures (a
 * missing path, execve, a spec the sandbox refuses) return their -errno the same way: all of
 * them are a KG_SB_END_SETUP end. The child dies with the calling *thread* (PR_SET_PDEATHSIG),
 * and the caller must not reap children it did not start (waitpid(-1)). */
int kg_sb_spawn(const struct kg_sb_spec *spec, struct kg_sb_child **out, kg_error *e);

/* Waits until the caller's fd is readable, the child ends, or timeout_ms passes (-1: no limit but
 * the watchdog), servicing the sandbox's own fds meanwhile (output capture, seccomp notifications,
 * the watchdog). Returns 1 when fd is readable, 0 on timeout, KG_SB_ENDED when the child ended.
 * A readable fd wins over the end (it may hold the program's last words; at EOF stop passing it:
 * fd = -1 waits for the end alone). The watchdog and the seccomp notifications are serviced only
 * while the caller is in here or in kg_sb_wait; RLIMIT_CPU bounds a child nobody waits for. */
#define KG_SB_ENDED 2
int kg_sb_wait_fd(struct kg_sb_child *c, int fd, int timeout_ms);

/* Where no cgroup bounds the tree's memory the supervisor counts it itself (memory.c): every few
 * milliseconds while the caller waits in kg_sb_wait_fd, and whenever the caller has stopped the
 * program (kg_sb_proc_stop) and calls this. Over the bound the tree is ended as KG_SB_END_MEMORY
 * and KG_SB_ENDED returned (also when it had ended already); 0 otherwise. */
int kg_sb_check_memory(struct kg_sb_child *c);

/* Kills the whole process tree now and records why (TIMEOUT for a caller's deadline, KILLED
 * otherwise). Does not wait. */
void kg_sb_kill(struct kg_sb_child *c, enum kg_sb_end why);

/* Waits for the end (the watchdog still applies), reaps, fills *o. Safe to call twice. */
int kg_sb_wait(struct kg_sb_child *c, struct kg_sb_outcome *o);

pid_t kg_sb_pid(const struct kg_sb_child *c);
unsigned kg_sb_layers_active(const struct kg_sb_child *c);
/* Why layers failed or came up reduced ("cgroup: no writable cgroup2 tree with memory, pids"),
 * "" when all came up; owned by c. */
const char *kg_sb_notes(const struct kg_sb_child *c);
/* Kills the child if it still runs, reaps it, frees everything. NULL is fine. */
void kg_sb_free(struct kg_sb_child *c);

/* --- the program's process, watched from outside (proc.c): the kernel's account, never its own --- */

#define KG_SB_MAX_TASKS 1024
struct kg_sb_process {
	int pidfd; /* signals go through it: a recycled pid is never hit */
	pid_t pid; /* in the caller's pid namespace */
	int stopped;
	int n_tasks; /* after kg_sb_proc_tasks or kg_sb_proc_stop */
	pid_t tasks[KG_SB_MAX_TASKS];
};
int kg_sb_proc_attach(struct kg_sb_process *p, pid_t pid, kg_error *e);
void kg_sb_proc_detach(struct kg_sb_process *p);
/* SIGSTOP, then waits until the kernel reports every thread stopped (tasks filled): from then on
 * nothing in the process runs and its memory holds still. -ESRCH when it ended, -ETIMEDOUT when a
 * thread did not stop in time. */
int kg_sb_proc_stop(struct kg_sb_process *p, int timeout_ms, kg_error *e);
/* SIGCONT after a stop (no-op otherwise). */
int kg_sb_proc_cont(struct kg_sb_process *p, kg_error *e);
/* Lists the threads (tasks, n_tasks). */
int kg_sb_proc_tasks(struct kg_sb_process *p, kg_error *e);
/* Each listed thread's CPU time so far in ns (/proc/PID/task/TID/schedstat, the kernel's own
 * account), into cpu_ns[i]; -ENOENT where the kernel keeps none (no schedstat). */
int kg_sb_proc_task_cpu(const struct kg_sb_process *p, uint64_t *cpu_ns, kg_error *e);
/* The caller's tid of the task the program knows as inner (its own pid namespace), from the tasks
 * listed last; 0 when none. */
pid_t kg_sb_proc_outer_tid(const struct kg_sb_process *p, pid_t inner);

struct kg_sb_range {
	uint64_t lo, hi;
};
/* The process's sealed mappings (mseal, "sl" in smaps' VmFlags), adjacent ones merged: the count,
 * or -errno. */
int kg_sb_sealed_ranges(pid_t pid, struct kg_sb_range *out, int max, kg_error *e);

/* Where mseal is missing: the process's read-only file mappings (code, read-only data, RELRO)
 * and its arena's span (from the first to the last mapping of a memfd, its guard pages with it),
 * from /proc/pid/maps, merged; the count or -errno. */
int kg_sb_image_ranges(pid_t pid, struct kg_sb_range *out, int max, kg_error *e);

/* From now on the program is untrusted (it is about to load untrusted code): with a `watched`
 * spec, a filter stacked by any of its threads and a mapping, protection or advice call over one of
 * its sealed ranges (read now from /proc/pid/smaps; where the host has no mseal, its read-only
 * file mappings and arena instead, kg_sb_image_ranges) are refused and end it as
 * KG_SB_END_TAMPER, named. pid is the program's, as the caller knows it. */
int kg_sb_distrust(struct kg_sb_child *c, pid_t pid, kg_error *e);

/* When kgate runs as root, the sandboxed program runs as the unprivileged outer uid/gid 65534
 * (uid 0 inside its user namespace), so a scratch tree it must write to (KG_SB_PATH_RW) has to
 * belong to that id: this chowns the tree at dir, which the caller created, to it (symlinks are not
 * followed). A no-op when kgate does not run as root. */
int kg_sb_chown_scratch(const char *dir, kg_error *e);

/* --- called inside the sandboxed program (seccomp_deferred = 1) --- */

struct kg_sb_filter_opts {
	/* Used only outside a sandbox (no KG_SB_ENV_FILTER): inside one, the spawn spec decides. */
	enum kg_sb_profile profile;
	int allow_threads;
	uint64_t mem_bytes; /* 0: no mmap size rule */
	const char *const *syscalls; /* NULL-ended extra names */
	int readonly_opens;
	/* What only the program knows, after its initialisation: */
	const int *ioctl_fds; /* ioctl allowed only on these fds (a driver's), besides tty queries */
	int n_ioctl_fds;
	/* sendmsg/recvmsg/sendto/recvfrom are allowed on the handed fds and the notify socket; a
	 * program that runs under a tool (compute-sanitizer) also needs the tool's sockets, opened
	 * before the filter by the tool's injected library. */
	const int *msg_fds;
	int n_msg_fds;
};
/* Inside the program (inside_seccomp.c): applies the profile's allowlist to every thread of the
 * calling process (TSYNC) and passes the notification fd to the supervising parent, so that a
 * denied call is reported by name. Call it after initialisation and before loading untrusted
 * code; on an error, load nothing. Outside a sandbox (no KG_SB_ENV_NOTIFY_FD) the filter kills
 * instead of notifying. */
int kg_sb_seccomp_apply(const struct kg_sb_filter_opts *o, kg_error *e);

/* Seals, inside the program (inside_seal.c): call them before loading untrusted code (memory,
 * image), and right after (calls). kg_sb_seal_memory makes [addr, addr+len) (page-rounded: give
 * it whole pages of its own) prot, then seals it with mseal(2) where the layer is active;
 * kg_sb_seal_image seals every loaded object's code, read-only data and RELRO (the GOT under
 * -z now). */
int kg_sb_seal_memory(void *addr, size_t len, int prot, kg_error *e);
int kg_sb_seal_image(kg_error *e);
/* Seals [addr, addr+len) as it is mapped now (its protections unchanged), where the layer is
 * active: the range must be mapped in full. */
int kg_sb_seal_range(void *addr, size_t len, kg_error *e);
/* No new code from now on, for the calling thread and the threads it starts later: a stacked
 * Landlock domain grants only the spec's sealed_opens, and a stacked filter kills the process on
 * any PROT_EXEC mapping and, when sealed_opens is empty, on any open (the supervisor then reports
 * an unnamed SIGSYS, denials_named set). Call it after kg_sb_seccomp_apply, on the thread that
 * will run the untrusted code, and load that code on a thread started before the filter: the
 * code's constructors run there, and cannot undo a seal that another thread holds. */
#define KG_SB_SEAL_NO_FILE_MAPS 0x1u /* and no file mapped at all (a program that mapped its files before) */
int kg_sb_seal_calls(unsigned flags, kg_error *e);
/* For the thread that loads untrusted code while the others are sealed: its constructors may read
 * files and map a file executable (what a dynamic loader does), never make anonymous memory
 * executable, change a mapping to executable, or write, create or truncate a file. Call it on
 * that thread after kg_sb_seccomp_apply and before the load. */
int kg_sb_seal_loader(kg_error *e);

#endif
