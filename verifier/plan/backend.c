/* The backend table (backend.h): the C compiler and the CUDA toolkit as command builders, the
 * run sandbox's data for each (the CUDA driver's device nodes, /proc and /sys needs and the few
 * extra system calls it makes after context creation, measured on an H200), the torch reference
 * runner's interpreter profile, and the imports a backend's runtime or compiler brings that no
 * policy has to list. */
#include "verifier/plan/backend.h"

#include "verifier/plan/paths.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kg_cuda_home(char *out, size_t outsz)
{
	const char *ch = getenv("CUDA_HOME");
	const char *home = ch && *ch ? ch : "/usr/local/cuda";
	char *real = realpath(home, NULL);
	snprintf(out, outsz, "%s", real ? real : home);
	free(real);
}

static int push(struct kg_compile_cmd *c, const char *arg, kg_error *e)
{
	if (c->argc >= KG_COMPILE_MAX_ARGS - 1)
		return kg_err(e, -E2BIG, "compile: too many arguments");
	c->argv[c->argc++] = arg;
	c->argv[c->argc] = NULL;
	return 0;
}

/* Flags and libraries come last, after kgate's own, so a flag cannot rename the output. */
static int push_tail(struct kg_compile_cmd *c, const struct kg_compile_req *r, kg_error *e)
{
	int rc = 0;
	for (int i = 0; i < r->n_flags && !rc; i++)
		rc = push(c, r->flags[i], e);
	for (int i = 0; i < r->n_libs && i < (int)KG_ARRAY_LEN(c->libs) && !rc; i++) {
		snprintf(c->libs[i], sizeof(c->libs[i]), "-l%s", r->libs[i]);
		rc = push(c, c->libs[i], e);
	}
	return rc;
}

static int cc_cmd(struct kg_compile_cmd *c, const struct kg_compile_req *r, kg_error *e)
{
	memset(c, 0, sizeof(*c));
	/* cc is an alternatives symlink; resolved here so the sandbox needs no /etc/alternatives */
	char *real = realpath("/usr/bin/cc", NULL);
	snprintf(c->store[0], sizeof(c->store[0]), "%s", real ? real : "/usr/bin/cc");
	free(real);
	snprintf(c->store[1], sizeof(c->store[1]), "-I%s", r->include_inside);
	const char *fixed[] = {c->store[0], "-std=gnu11", "-O2", "-fPIC", "-shared", "-Wall", c->store[1], "-o",
			       r->out_inside, r->src_inside};
	int rc = 0;
	for (size_t i = 0; i < KG_ARRAY_LEN(fixed) && !rc; i++)
		rc = push(c, fixed[i], e);
	if (!rc)
		rc = push_tail(c, r, e);
	if (!rc)
		rc = push(c, "-lm", e);
	c->envp[0] = "PATH=/usr/bin:/bin";
	c->envp[1] = "LANG=C";
	c->envp[2] = "HOME=/work";
	c->envp[3] = "TMPDIR=/tmp";
	return rc;
}

static int nvcc_cmd(struct kg_compile_cmd *c, const struct kg_compile_req *r, kg_error *e)
{
	memset(c, 0, sizeof(*c));
	char *home = c->store[0];
	kg_cuda_home(home, sizeof(c->store[0]));
	snprintf(c->store[1], sizeof(c->store[1]), "%s/bin/nvcc", home);
	const char *arch = r->arch ? r->arch : "90a";
	snprintf(c->store[2], sizeof(c->store[2]), "-gencode=arch=compute_%s,code=sm_%s", arch, arch);
	snprintf(c->store[3], sizeof(c->store[3]), "-Xlinker=-rpath,%s/lib64", home);
	snprintf(c->store[4], sizeof(c->store[4]), "-I%s", r->include_inside);
	snprintf(c->store[5], sizeof(c->store[5]), "PATH=%s/bin:/usr/bin:/bin", home);
	/* -cudart shared: the runner initialises the runtime before its filter, and the candidate's
	 * imports stay a short list of cuda* symbols instead of cudart_static's dlopen and pthread
	 * internals. */
	const char *fixed[] = {c->store[1], "-O3", c->store[2], "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
			       c->store[3], c->store[4], "-o", r->out_inside, r->src_inside};
	int rc = 0;
	for (size_t i = 0; i < KG_ARRAY_LEN(fixed) && !rc; i++)
		rc = push(c, fixed[i], e);
	if (!rc)
		rc = push_tail(c, r, e);
	c->envp[0] = c->store[5];
	c->envp[1] = "LANG=C";
	c->envp[2] = "HOME=/work";
	c->envp[3] = "TMPDIR=/tmp";
	/* a toolkit under /usr is already visible through the sandbox's /usr */
	if (strncmp(home, "/usr/", 5))
		c->paths[c->n_paths++] = (struct kg_sb_path){.host = home, .flags = KG_SB_PATH_EXEC | KG_SB_PATH_OPTIONAL};
	return rc;
}

/* A ModelNew candidate's build: kgate's builder (torch_build.py, beside kgate-run) runs the module's
 * top level once under the Python that hosts the torch runner, and compiles each load_inline
 * extension it asks for with the C++ compiler (nvcc for CUDA sources) into one kernel.so. */
/* What CPython 3.11 and torch 1.13 (Debian's python3-torch) call besides the run profile's calls,
 * measured with strace -f on an import, a module's Model built and its forward run: the allocator's
 * NUMA policy queries, an epoll fd of torch's, mlock of a small page by OpenBLAS, and statfs probes
 * for SELinux. Extend from the syscall names that denials report. */
static const char *const torch_syscalls[] = {
	"get_mempolicy", "set_mempolicy", "mbind", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"mlock", "munlock", "statfs", "fstatfs", "sched_getparam", "sched_getscheduler", "sched_setaffinity",
	"sched_get_priority_max", "sched_get_priority_min", "readlinkat", "pipe2", "eventfd2", NULL,
};

/* The builder's extra calls beyond torch's: its module's child confines itself (Landlock with no
 * write granted; its rlimits the profile's own argument-checked calls lower) before it runs the
 * candidate's top level. */
static const char *const torch_build_syscalls[] = {
	"get_mempolicy", "set_mempolicy", "mbind", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"mlock", "munlock", "statfs", "fstatfs", "sched_getparam", "sched_getscheduler", "sched_setaffinity",
	"sched_get_priority_max", "sched_get_priority_min", "readlinkat", "pipe2", "eventfd2",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", NULL,
};

static int torch_cmd(struct kg_compile_cmd *c, const struct kg_compile_req *r, kg_error *e)
{
	memset(c, 0, sizeof(*c));
	if (kg_path_python(c->store[0], sizeof(c->store[0]), c->store[6], sizeof(c->store[6])))
		return kg_err(e, -ENOENT, "%s", c->store[6]);
	c->tool_version = c->store[6]; /* torch's version: a new torch needs its extensions rebuilt */
	c->syscalls = torch_build_syscalls;
	if (kg_path_runner_script("torch_build.py", c->store[1], sizeof(c->store[1])))
		return kg_err(e, -ENOENT, "torch_build.py not found beside kgate-run");
	c->script = c->store[1];
	int rc = 0;
	const char *fixed[] = {c->store[0], "-I", "-B", c->store[1], r->src_inside, r->out_inside};
	for (size_t i = 0; i < KG_ARRAY_LEN(fixed) && !rc; i++)
		rc = push(c, fixed[i], e);
	for (int i = 0; i < r->n_flags && !rc; i++)
		rc = push(c, r->flags[i], e);
	char *home = c->store[2];
	kg_cuda_home(home, sizeof(c->store[2]));
	snprintf(c->store[3], sizeof(c->store[3]), "CUDA_HOME=%s", home);
	snprintf(c->store[4], sizeof(c->store[4]), "KGATE_CUDA_ARCH=%s", r->arch ? r->arch : "");
	c->envp[0] = "PATH=/usr/bin:/bin";
	c->envp[1] = "LANG=C";
	c->envp[2] = "HOME=/work";
	c->envp[3] = "TMPDIR=/work";
	c->envp[4] = c->store[3];
	c->envp[5] = c->store[4];
	c->envp[6] = "OMP_NUM_THREADS=1";
	c->envp[7] = "USER=kgate"; /* spares the interpreter a passwd lookup (a socket to nscd) */
	/* the builder and an interpreter outside /usr (a virtual environment) are shown as they are */
	kg_python_sandbox_paths(c->store[0], c->store[1], c->store[5], sizeof(c->store[5]), c->paths, &c->n_paths);
	if (strncmp(home, "/usr/", 5))
		c->paths[c->n_paths++] = (struct kg_sb_path){.host = home, .flags = KG_SB_PATH_EXEC | KG_SB_PATH_OPTIONAL};
	return rc;
}

static const char *const cuda_devices[] = {"/dev/nvidia*", NULL};

/* What the driver and its threads do after context creation besides the run profile's calls:
 * allocation, copies, PTX JIT, launches, events, streams and pinned memory needed only these
 * (the JIT's threads query priorities). Extend from the syscall names denials report. */
static const char *const cuda_syscalls[] = {
	"epoll_wait", "epoll_pwait", "epoll_ctl", "select", "pselect6",
	"sched_getparam", "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", NULL,
};

/* The C compiler's own calls for a language construct, not a library a policy chooses: a
 * `static __thread` variable in a -fPIC object is reached through __tls_get_addr (the
 * general-dynamic TLS model of a dlopen'ed module; the loader allocates the module's block for
 * each thread on its first access, with malloc, under the run filter and the seal alike). It
 * hands out the caller's own thread's storage, nothing the process could not reach anyway. */
static const char *const cc_symbols[] = {"__tls_get_addr", NULL};

static const char *const cuda_symbols[] = {
	"cuda*", "__cuda*", "__cxa_*", "__gxx_personality_v0", "_Unwind_Resume", "_Znwm", "_Znam", "_ZdlPv*",
	"_ZdaPv*", "_ZSt9terminatev", "__tls_get_addr", NULL, /* host code's __thread, as cc_symbols */
};

/* Checked before any allowlist: IPC handles reach other processes' memory, a device reset or a
 * device switch pulls the context from under the runner, driver entry points are a dlsym (only a
 * policy's gpu.driver_entry_points lifts that one: kg_policy_gpu_symbol_allowed, build.c; the
 * driver's tensor-map encoders are imported by name under gpu.tensor_maps instead). */
static const char *const cuda_denied[] = {
	"cudaIpc*", "cudaDeviceReset", "cudaSetDevice*", "cudaGetDriverEntryPoint*", "cudaSetValidDevices", NULL,
};

static const char *const cuda_libraries[] = {"libcudart.so.*", "libstdc++.so.*", NULL};

/* What the driver may still open after the candidate is loaded and the runner sealed (no new code,
 * no other files): device nodes it opens lazily (nvidia-uvm), thread names under /proc, topology
 * under /sys, the JIT cache under HOME=/tmp. Not yet measured on a GPU: extend from a denial (an
 * EACCES inside the driver after LOAD) and keep it this short. */
static const char *const cuda_sealed_opens[] = {"rw:/dev", "rw:/proc", "r:/sys", "rw:/tmp", NULL};


static const struct kg_backend backends[KG_BACKEND_COUNT_] = {
	[KG_BACKEND_CPU] = {
		.id = KG_BACKEND_CPU,
		.sandbox_name = "run-cpu",
		.cpu_clock = 1,
		.compile_wall_s = 120,
		.compile_cmd = cc_cmd,
		.symbols = cc_symbols,
	},
	[KG_BACKEND_CUDA] = {
		.id = KG_BACKEND_CUDA,
		.sandbox_name = "run-cuda",
		.needs_gpu = 1,
		.probe = kg_gpu_probe,
		.compile_wall_s = 300,
		.compile_cmd = nvcc_cmd,
		.devices = cuda_devices,
		/* the driver names its threads through /proc/self/task/TID/comm and cuInit fails
		 * when it cannot; opens stay read-only so /proc/self/mem cannot patch the runner */
		.proc = KG_SB_PROC_RW,
		.sys_ro = 1,
		.syscalls = cuda_syscalls,
		.readonly_opens = 1,
		.sealed_opens = cuda_sealed_opens,
		.address_space_unbounded = 1,
		.symbols = cuda_symbols,
		.denied_symbols = cuda_denied,
		.libraries = cuda_libraries,
	},
	[KG_BACKEND_TORCH] = {
		.id = KG_BACKEND_TORCH,
		.sandbox_name = "run-torch",
		.cpu_clock = 1,
		.module_tasks_only = 1,
		.runner_script = "torch_runner.py",
		/* a torch extension's C++ build takes half a minute on a small machine, a few at once more */
		.compile_wall_s = 600,
		.compile_cmd = torch_cmd,
		/* torch reads the CPU's topology (/proc/cpuinfo, /sys/devices/system/cpu) when it loads */
		.proc = KG_SB_PROC_RO,
		.sys_ro = 1,
		.syscalls = torch_syscalls,
		.readonly_opens = 1,
		/* the interpreter and torch's libraries reserve far more address space than they use;
		 * what they write (the heap, private mappings) is bounded by the policy's memory */
		.address_space_unbounded = 1,
		.data_bounded = 1,
	},
};

/* What torch with CUDA calls on a device besides the run profile's: the CPU torch runner's calls,
 * the driver's (cuda_syscalls), and Triton's cache lookup, which makes its key's directory whether
 * or not it is there (os.makedirs: mkdir answers EEXIST in the run's read-only cache, or makes a
 * directory in the process's own private /tmp; nothing else is writable). Extend from the syscall
 * names that denials report on a GPU host. */
static const char *const torch_device_syscalls[] = {
	"get_mempolicy", "set_mempolicy", "mbind", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"mlock", "munlock", "statfs", "fstatfs", "sched_getparam", "sched_getscheduler", "sched_setaffinity",
	"sched_get_priority_max", "sched_get_priority_min", "readlinkat", "pipe2", "eventfd2", "select", "pselect6",
	"mkdir", "mkdirat", NULL,
};

/* The torch backend on the device: the CUDA runner's sandbox (the driver's nodes, /proc read-write
 * for its thread names, /sys read-only) for a Python runner that imports kgate-device's arena
 * (runner/torch_device.py) and applies its own filter after CUDA is up (script_filters_itself). */
static const struct kg_backend torch_device = {
	.id = KG_BACKEND_TORCH,
	.sandbox_name = "run-torch-cuda",
	.needs_gpu = 1,
	.probe = kg_gpu_probe,
	.module_tasks_only = 1,
	.runner_script = "torch_runner.py",
	.script_filters_itself = 1,
	.compile_wall_s = 600,
	.compile_cmd = torch_cmd,
	.devices = cuda_devices,
	.proc = KG_SB_PROC_RW,
	.sys_ro = 1,
	.syscalls = torch_device_syscalls,
	.readonly_opens = 1,
	/* the driver and the interpreter reserve far more than they use, and the driver's mappings of
	 * device memory are no heap: host memory is bounded by the cgroup where there is one */
	.address_space_unbounded = 1,
};

/* The names come from the vocabulary table, the rest from this one, joined once. */
static struct kg_backend joined[KG_BACKEND_COUNT_];
static struct kg_backend joined_torch_device;
static pthread_once_t join_once = PTHREAD_ONCE_INIT;

static void join_tables(void)
{
	for (int i = 0; i < KG_BACKEND_COUNT_; i++) {
		joined[i] = backends[i];
		joined[i].name = kg_backend_name((enum kg_backend_id)i);
		joined[i].ext = kg_backend_ext((enum kg_backend_id)i);
		joined[i].ref_key = kg_backend_ref_key((enum kg_backend_id)i);
	}
	joined_torch_device = torch_device;
	joined_torch_device.name = joined[KG_BACKEND_TORCH].name;
	joined_torch_device.ext = joined[KG_BACKEND_TORCH].ext;
	joined_torch_device.ref_key = joined[KG_BACKEND_TORCH].ref_key;
}

const struct kg_backend *kg_backend_torch_device(void)
{
	pthread_once(&join_once, join_tables);
	return &joined_torch_device;
}

const struct kg_backend *kg_backend_get(enum kg_backend_id id)
{
	if ((unsigned)id >= KG_BACKEND_COUNT_)
		return NULL;
	pthread_once(&join_once, join_tables);
	return &joined[id];
}

const struct kg_backend *kg_backend_find(const char *name)
{
	enum kg_backend_id id;
	return kg_backend_parse(name, &id) ? NULL : kg_backend_get(id);
}

static int glob_any(const char *const *globs, const char *s)
{
	for (; globs && *globs; globs++)
		if (!fnmatch(*globs, s, 0))
			return 1;
	return 0;
}

int kg_backend_symbol_verdict(const struct kg_backend *b, const char *sym)
{
	if (glob_any(b->denied_symbols, sym))
		return -1;
	return glob_any(b->symbols, sym);
}

int kg_backend_library_allowed(const struct kg_backend *b, const char *lib)
{
	return glob_any(b->libraries, lib);
}
