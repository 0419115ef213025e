/* kgate's own files on this host and the Python with torch (paths.c): the resolver's half that
 * needs no task, policy or backend, so that the backend table and the torch derivation can ask it. */
#ifndef KG_PATHS_H
#define KG_PATHS_H

#include <stddef.h>

#include "kg_common.h"

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
