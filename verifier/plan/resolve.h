/* One resolver for what a command names: a task, a policy, a backend, and kgate's own files on
 * this host (the runner, the candidate header, compute-sanitizer). verify, search, doctor and
 * tasks all ask here, so their search paths cannot drift apart. */
#ifndef KG_RESOLVE_H
#define KG_RESOLVE_H

#include <stddef.h>

#include "kg_common.h"
#include "policy/policy.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/task.h"

/* A policy by name ("default", "strict": $KGATE_HOME/policy, SYSCONFDIR, ./policy) or path. NULL
 * is "default" where one is installed, else the built-in defaults. */
int kg_resolve_policy(const char *name_or_path, struct kg_policy *p, kg_error *e);

/* A task by name (the task search path, first match) or manifest path. */
int kg_resolve_task(const char *name_or_path, struct kg_task *t, kg_error *e);

/* A task as kgate verify and kgate search name it: a KernelBench-format module (PROBLEM.py), derived
 * with dims (its top-level constants, "N=64,D=128"; NULL: its own), or a name or manifest path as
 * kg_resolve_task, which takes no dims (-EINVAL). */
int kg_resolve_task_dims(const char *task, const char *dims, struct kg_task *t, kg_error *e);

/* The task search path in order: $KGATE_TASKS, $KGATE_HOME/tasks, DATADIR/tasks, ./tasks. */
#define KG_TASK_DIRS_MAX 4
int kg_task_dirs(char dirs[KG_TASK_DIRS_MAX][4096]);
/* Calls fn for each task name found on the search path, once per name (the first directory that
 * holds it wins, as kg_resolve_task does), in name order; path is its manifest. Stops early when
 * fn returns nonzero and returns that value. */
typedef int (*kg_task_visit_fn)(const char *name, const char *path, void *ctx);
int kg_tasks_each(kg_task_visit_fn fn, void *ctx);

/* The backend a candidate is written for: by name when given, else by the file's extension. */
int kg_resolve_backend(const char *name, const char *candidate, const struct kg_backend **out, kg_error *e);
/* The backend a search uses when none is named: a GPU backend whose reference the task has when a
 * GPU is present, else cpu. */
const struct kg_backend *kg_resolve_default_backend(const struct kg_task *t, int gpu_present);

/* kgate's own files: next to the running binary (a build tree) or installed. */
int kg_path_runner(char *out, size_t outsz);
/* kgate-device, the keeper of a run's device memory: $KGATE_DEVICE, else beside kgate-run. */
int kg_path_device(char *out, size_t outsz);
int kg_path_include(char *out, size_t outsz); /* the directory holding kgate/kernel.h */
/* A runner script shipped beside kgate-run ("torch_runner.py"), as an absolute path. */
int kg_path_runner_script(const char *name, char *out, size_t outsz);
/* The Python that has torch: $KGATE_PYTHON, else /usr/bin/python3 (Debian's python3-torch), else
 * python3 on PATH; each checked once per process with `import torch`. out gets its path, version
 * (when not NULL) what it said: "torch 1.13.0 (no torch.compile) (no CUDA)", "torch
 * 2.11.0+cu130 (CUDA 13.0), Triton". -ENOENT, with why in version,
 * when none has torch. */
int kg_path_python(char *out, size_t outsz, char *version, size_t versz);
/* Where a module's torch runs: 1 on the GPU (a device is present, the torch that version describes,
 * kg_path_python's words, has CUDA, and KGATE_TORCH_DEVICE is not "cpu"), 0 on the host; why says
 * which device and torch, or why not; gpu gets the probe's findings. */
struct kg_gpu_info;
int kg_torch_placement(const char *version, struct kg_gpu_info *gpu, char *why, size_t whysz);
/* Whether this host can build a ModelNew's load_inline extensions (torch_build.py --check, run as
 * kgate's own process, no candidate in it): 0 and "ok" when it can, 1 with the missing pieces in out
 * ("missing pybind11's headers, pybind11/pybind11.h (Debian: pybind11-dev); ..."), -errno with why
 * when the check could not run (no Python with torch). */
int kg_torch_toolchain(char *out, size_t outsz);
/* The exit status of torch_build.py for a build this host lacks a piece of the toolchain for
 * (load_inline's, or the setuptools that torch.utils.cpp_extension imports): not the candidate's fault (the builder's own process decides it, after the candidate's top
 * level ran in a child), so the run is not verified and kg_torch_toolchain names the pieces. */
#define KG_TORCH_BUILD_NO_TOOLCHAIN 4
/* What a Python runner's sandbox shows beside /usr: the script where it is not under /usr, and a
 * Python installed elsewhere (pyenv, a standalone build) with its whole prefix, executable, and a
 * virtual environment's prefix besides, whose python3 links to another interpreter's binary.
 * Appends to paths[*n] (room for three more); prefix is the caller's storage for the latter two
 * (each gets half of it). */
struct kg_sb_path;
void kg_python_sandbox_paths(const char *py, const char *script, char *prefix, size_t prefix_sz,
			     struct kg_sb_path *paths, int *n);
/* NVIDIA's compute-sanitizer binary itself (not the bin/ wrapper): $KGATE_COMPUTE_SANITIZER, else
 * under $CUDA_HOME, else /usr/local/cuda. */
int kg_path_compute_sanitizer(char *out, size_t outsz);

#endif
