/* Where a search's verifications run, behind one seam: `local` (forked workers on this host, one
 * per GPU pinned with CUDA_VISIBLE_DEVICES, or up to the cores for CPU candidates) and `slurm`
 * (each verification a job step on a cluster node, its report collected through the search's
 * output directory on a shared file system). The search loop, the finalists' re-timing and the
 * history do not know which one ran a verification, so a search resumes under either. */
#ifndef KG_EXECUTOR_H
#define KG_EXECUTOR_H

#include "agents/search.h"

struct kg_executor;

struct kg_executor_ops {
	const char *name;
	/* Verifications at once when --jobs is not given. */
	int (*default_jobs)(struct kg_executor *x, const struct kg_backend *be);
	/* Verifies every job, at most max_workers at a time; done() runs in this process as each one
	 * finishes. Jobs that could not be run get job->error. Returns a negative errno when the run
	 * itself failed or was interrupted (-EINTR: SIGINT, SIGTERM or SIGHUP; nothing is left
	 * running). */
	int (*run)(struct kg_executor *x, const struct kg_verify_opts *base, struct kg_vjob *jobs, int n,
		   int max_workers, int timeout_s, kg_vjob_done_fn done, void *ctx, kg_error *e);
	void (*destroy)(struct kg_executor *x);
};

struct kg_executor_opts {
	const char *name; /* "local" (NULL too) or "slurm" */
	const char *outdir; /* the search's output directory (slurm: on a shared file system) */
	const char *exe; /* the kgate binary the nodes run; NULL: /proc/self/exe */
	const char *partition; /* slurm: -p; NULL: the cluster's default */
	const char *slurm_args; /* slurm: more sbatch options, split at white space; NULL: none */
};

struct kg_executor {
	const struct kg_executor_ops *ops;
	struct kg_executor_opts o;
	char outdir[PATH_MAX], exe[PATH_MAX], partition[128], slurm_args[1024];
};

int kg_executor_open(const struct kg_executor_opts *o, struct kg_executor **out, kg_error *e);
void kg_executor_close(struct kg_executor *x);
/* The names kg_executor_open knows, for usage texts. */
const char *kg_executor_names(void);

/* ---- local (agents/workers.c): the pinning, as pure functions for the tests ---- */

#define KG_MAX_GPUS 256

/* The GPUs named by a CUDA_VISIBLE_DEVICES value, in its order: indices, GPU-/MIG- UUIDs; empty
 * entries are skipped, and the list ends at the first invalid one, as the CUDA runtime does
 * ("0,1,-1,2" is 0 and 1; "" is none). Returns how many (<= max). */
int kg_gpu_parse_visible(const char *v, char ids[][32], int max);
/* The GPUs of a /dev directory: nvidiaN entries in number order (nvidiactl, nvidia-uvm, ... are
 * not GPUs). Returns how many (<= max). */
int kg_gpu_scan_dev(const char *dev, char ids[][32], int max);
/* This host's GPUs: CUDA_VISIBLE_DEVICES when it is set (even empty: no GPU), else /dev. */
int kg_gpu_list(char ids[][32], int max);
/* The GPU that worker slot i is pinned to: slot i gets GPU i mod n, so up to n verifications
 * run on n GPUs, one each; NULL when there are none. */
const char *kg_gpu_for_slot(char ids[][32], int n, int slot);

/* ---- slurm (agents/slurm.c) ---- */

struct kg_slurm_job {
	const char *exe, *task, *candidate, *policy, *backend; /* absolute paths where they are paths */
	const char *dims; /* a module task's --dims; NULL: none */
	int iterations, trials; /* as kg_verify_opts: -1 / 0 keep the policy's */
	int no_cache; /* --no-cache: the node compiles every candidate */
	int gpu; /* the backend needs a GPU: --gres=gpu:1 */
	int timeout_s; /* 0: none; else --time in whole minutes, rounded up */
	const char *partition, *extra; /* NULL: none */
	const char *script, *report, *log; /* files in the output directory */
};

/* The batch script (one srun job step running `kgate verify ... --report json:REPORT`) into out,
 * every argument single-quoted for the shell. */
int kg_slurm_script(const struct kg_slurm_job *j, kg_buf *out);
/* sbatch's arguments, NULL-terminated, pointing into store (at least 64 entries): --parsable
 * --wait, the job name, the log, the partition, --gres=gpu:1 where a GPU is asked for, --time,
 * the extra options, the script. Returns how many. */
int kg_slurm_sbatch_argv(const struct kg_slurm_job *j, char store[][1024], const char **argv, int max);

#endif
