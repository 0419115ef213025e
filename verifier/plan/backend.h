/* The trusted side's backend table: everything kgate must know to build, sandbox, statically
 * check and place a candidate of one kind (cpu, cuda), or to run a trusted reference (torch). Nothing outside this table compares a
 * backend's name; adding a backend is a row here, a line in kg_vocab.h and its runner backend. */
#ifndef KG_BACKEND_H
#define KG_BACKEND_H

#include <limits.h>

#include "kg_common.h"
#include "kg_vocab.h"
#include "sandbox/sandbox.h"
#include "verifier/plan/gpu.h"

#define KG_COMPILE_MAX_ARGS 96

/* A compiler command line for the compile sandbox, with the storage its strings live in. */
struct kg_compile_cmd {
	const char *argv[KG_COMPILE_MAX_ARGS];
	int argc;
	const char *envp[10];
	struct kg_sb_path paths[4]; /* toolchain trees to show besides /usr (a CUDA under /opt) */
	int n_paths;
	/* An interpreted builder (torch_build.py): its host path, whose content keys the compile
	 * cache beside the interpreter's (argv[0]); NULL for a compiler binary. */
	const char *script;
	const char *tool_version; /* what keys the cache beside the binary (torch's version); NULL */
	const char *const *syscalls; /* the compile filter's extra calls (an interpreter's); NULL */
	char store[8][PATH_MAX + 64];
	char libs[4][40];
};

/* What a compile asks for; the backend turns it into a command. */
struct kg_compile_req {
	const char *src_inside; /* "/work/kernel.cu" */
	const char *out_inside; /* "/work/kernel.so" */
	const char *include_inside; /* "/kgate/include" */
	const char *arch; /* GPU architecture ("90a"); NULL: the backend's default */
	const char *const *flags; /* already checked against the policy */
	int n_flags;
	const char (*libs)[32]; /* trusted references only: "cublas" -> -lcublas */
	int n_libs;
};

struct kg_backend {
	enum kg_backend_id id;
	const char *name; /* "cuda" (kg_vocab.h) */
	const char *ext; /* ".cu" */
	const char *ref_key; /* the task manifest's reference key: "cuda" */
	const char *sandbox_name; /* the run sandbox's name in reports: "run-cuda" */
	int needs_gpu; /* a candidate runs only where the probe finds a device */
	void (*probe)(struct kg_gpu_info *g); /* the device, without creating a context; NULL: none */
	/* building */
	double compile_wall_s;
	int (*compile_cmd)(struct kg_compile_cmd *cmd, const struct kg_compile_req *r, kg_error *e);
	/* the runner's sandbox, as data (sandbox.h) */
	const char *const *devices;
	enum kg_sb_proc proc;
	int sys_ro;
	const char *const *syscalls;
	int readonly_opens;
	/* What the runner may still open once the candidate is loaded and the runner sealed
	 * ("rw:/dev", "r:/sys"; NULL: nothing, and any open ends the run as sandbox.dlopen). */
	const char *const *sealed_opens;
	/* The candidate's work runs on the host's CPU: the CPU time the kernel charges the runner's
	 * process bounds every timed call from below (judge/clock.c), whatever the runner claims. */
	int cpu_clock;
	int address_space_unbounded; /* the driver reserves terabytes it never backs: no RLIMIT_AS,
	                              * the per-mmap bound and the cgroup still hold */
	int data_bounded; /* with it: the policy's memory as RLIMIT_DATA (sandbox.h) */
	/* An interpreted runner: this script, run by the Python kg_path_python finds, from beside
	 * kgate-run (it speaks kgate-run's protocol on the same fds). NULL: kgate-run itself. The
	 * sandbox applies its filter before exec (an interpreter cannot apply one itself), so its
	 * syscalls are the interpreter's and its libraries' as well. */
	const char *runner_script;
	/* An interpreted runner on a device: its sandbox applies only the baseline deny filter before
	 * exec, and the runner applies the profile's filter itself once the driver's device nodes are
	 * open (kgate's filter library, libkgate-filter.so beside kgate-run), which is the only way
	 * their ioctls can be allowed by fd. */
	int script_filters_itself;
	/* A candidate of this backend needs a task given as a PyTorch module (a KernelBench ModelNew
	 * is built from the problem's constructor arguments and bound to its Model's parameters). */
	int module_tasks_only;
	/* static checks, besides the policy's lists: imports always allowed, imports always denied
	 * (checked first), libraries always allowed */
	const char *const *symbols;
	const char *const *denied_symbols;
	const char *const *libraries;
};

const struct kg_backend *kg_backend_get(enum kg_backend_id id);
/* By name; NULL when unknown. */
const struct kg_backend *kg_backend_find(const char *name);

/* The torch backend placed on the GPU: the same backend (id, name, builder, module tasks) whose
 * runner hosts the module on kgate-device's memory (runner/torch_device.py) in the CUDA runner's
 * sandbox. kg_torch_placement says when a run takes it. */
const struct kg_backend *kg_backend_torch_device(void);

/* 1 when the backend's own lists allow an import (denied: -1, not listed: 0). */
int kg_backend_symbol_verdict(const struct kg_backend *b, const char *sym);
int kg_backend_library_allowed(const struct kg_backend *b, const char *lib);

/* The CUDA toolkit's real directory ($CUDA_HOME, else /usr/local/cuda), resolved: a symlink cannot
 * be a mount point. */
void kg_cuda_home(char *out, size_t outsz);

#endif
