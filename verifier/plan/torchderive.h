/* Deriving the task manifests of KernelBench-format modules in a few sandboxed torch processes that
 * each take one module after another (runner/torch_derive.py, --derive-serve): a directory of
 * modules costs one start of Python with torch per process, not one per file; each module has a
 * time bound of its own, and one that runs past it or kills its process is named, the others go on. */
#ifndef KG_TORCHDERIVE_H
#define KG_TORCHDERIVE_H

#include <stddef.h>

#include "kg_common.h"

struct kg_torch_job {
	const char *module; /* the module's path (read as a user's file: no link, regular, capped) */
	const char *name; /* the task's name: [A-Za-z0-9_-] only */
	/* A job of another kind than a derivation: "state" (torch_derive.py's state(), the run's state
	 * file), its spec (lines sent before the module: the process gets spec, "source\n", module),
	 * and the largest reply taken (0: 4 MiB). NULL: a derivation. */
	const char *verb;
	const char *spec;
	size_t reply_max;
	/* results */
	kg_buf yaml; /* the manifest (the reply: a state job's file) when rc is 0; the caller's to free */
	int rc; /* 0; -EINVAL, the module's task cannot be derived (msg says why, naming the module);
	         * -ETIMEDOUT, past its time bound; -ENOENT, no Python with torch or no sandboxed
	         * process started; another -errno reading the module */
	char msg[1024];
	double seconds;
	int done;
};

struct kg_torch_derive_opts {
	const char *dims; /* "N=64,D=128" for every module (its top-level integer names), or NULL */
	double file_s; /* each module's time bound; 0: 60 s */
	int workers; /* processes at once; 0: one per CPU, at most 4 */
	/* called for each job once it and all jobs before it are done, in order, one call at a time */
	void (*done)(struct kg_torch_job *job, size_t i, void *arg);
	void *arg;
};

/* --dims as the derivation takes it (NAME=INT,...): 0 or -EINVAL with the reason. */
int kg_torch_check_dims(const char *dims, kg_error *e);
/* Derives every job; each job's own result in it. Returns 0, or -errno before any job ran (bad
 * --dims, no Python with torch, the runner scripts not found). */
int kg_torch_derive_jobs(struct kg_torch_job *jobs, size_t n, const struct kg_torch_derive_opts *o, kg_error *e);

#endif
