/* The search loop (`kgate search`): rounds of agent proposals, parallel verification, feedback,
 * selection of the fastest accepted candidates, and a history directory that a later run resumes
 * from. Knows the agent only through plugins/plugin.h and the verifier only through kg_verify. */
#ifndef KG_SEARCH_H
#define KG_SEARCH_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "kg_common.h"
#include "kg_vocab.h"
#include "plugins/plugin.h"
#include "verifier/verify.h"

struct kg_backend; /* verifier/plan/backend.h */

#define KG_SEARCH_MAX_ROUNDS 1000
#define KG_SEARCH_MAX_BRANCH 16
#define KG_SEARCH_MAX_PER_IDEA 16
#define KG_SEARCH_MAX_SETTINGS 64

struct kg_search_opts {
	const char *task; /* name, manifest path, or a KernelBench-format module (PROBLEM.py) */
	const char *dims; /* a module task's constants, "N=64,D=128" (kg_verify_opts.dims); NULL: its own */
	const char *agent; /* built-in name or plugin path */
	const char *outdir;
	const char *policy; /* NULL: as kgate verify */
	const char *backend; /* NULL: a GPU backend when a GPU is present and the task has its
			      * reference (cuda), else cpu (kg_resolve_default_backend). A proposal in
			      * Python for a module task is a ModelNew, verified as torch whatever this is */
	enum kg_agent_isolation isolation;
	const char *host_exe; /* NULL: /proc/self/exe */
	int agent_timeout_s; /* per propose call, 0: none */
	int rounds, branch, per_idea, keep, jobs; /* keep: seeds carried to the next round */
	int iterations; /* -1: the policy's */
	int trials; /* 0: the policy's */
	int verify_timeout_s; /* per candidate, 0: none */
	int history_limit; /* earlier candidates sent to the agent */
	uint64_t seed;
	int n_settings; /* agent settings, key=value */
	const char *keys[KG_SEARCH_MAX_SETTINGS];
	const char *values[KG_SEARCH_MAX_SETTINGS];
	int quiet;
	int finalists; /* the fastest accepted re-timed at the end (0: none) */
	int retime; /* re-timings of each finalist (0: none) */
	const char *executor; /* "local" (NULL too) or "slurm" (agents/executor.h) */
	const char *slurm_partition, *slurm_args; /* NULL: none */
	int no_cache; /* verifications compile without the compile cache (verifier/compile/cache.h) */
};

/* Runs (or resumes) a search. Returns the exit code: 0 a winner, 1 none correct, 2 usage or
 * configuration (with e set), 3 infrastructure (with e set). */
int kg_search(const struct kg_search_opts *o, kg_error *e);

/* `kgate search` and `kgate agent-host` (agents/cmd_search.c). */
int kg_cmd_search(int argc, char **argv);
int kg_cmd_agent_host(int argc, char **argv);

/* ---- history (agents/history.c) ---- */

enum kg_rec_verdict { KG_REC_ACCEPTED = 1, KG_REC_REJECTED = 2, KG_REC_ERROR = 3 };

struct kg_rec {
	char id[65]; /* SHA-256 of the source */
	int round, idea;
	enum kg_rec_verdict verdict;
	int timed;
	double speedup, median_ms;
	enum kg_backend_id backend; /* what it was verified as: the line's "language" (the backend's
				     * reference key, its file's extension); cpu when none */
	json_t *j; /* the history line (owned) */
};

struct kg_history {
	char dir[PATH_MAX];
	int n, cap;
	struct kg_rec *recs;
	unsigned char done[KG_SEARCH_MAX_ROUNDS + 1]; /* rounds with a "round" line */
	json_t *finalists; /* the last "finalists" line (owned), NULL when none */
	int duplicates; /* "duplicate" lines: proposals that were copies of a verified source */
	int skipped; /* unreadable lines (a write cut short by a crash) */
	int fd;
};

/* Opens DIR/history.jsonl for appending, loading the lines already there. */
int kg_history_open(struct kg_history *h, const char *dir, kg_error *e);
/* Appends one line (fsync'ed before returning). A "candidate" line is also added to recs; the
 * history takes its own reference to line. */
int kg_history_append(struct kg_history *h, json_t *line, kg_error *e);
const struct kg_rec *kg_history_find(const struct kg_history *h, const char *id);
void kg_history_close(struct kg_history *h);
/* The k best accepted records: timed ones by speedup (descending), then untimed in order. */
int kg_history_best(const struct kg_history *h, const struct kg_rec **out, int k);
/* Writes data to path through a temporary file, fsync and rename: readers see old or new. */
int kg_write_atomic(const char *path, const void *data, size_t len, kg_error *e);

/* ---- what a search leaves (agents/results.c) ---- */

/* OUTDIR/winner<ext> (w's source, the extension of the backend it was verified as) and
 * OUTDIR/winner.json (w's history line with its full report, and final, the finalists' re-timing,
 * under "finalists" when not NULL), each replaced atomically. */
int kg_search_write_winner(const char *outdir, const struct kg_rec *w, const json_t *final, kg_error *e);
/* OUTDIR/report.html: one self-contained page (inline SVG plot of the speedups per round, the
 * winner's source and verdict, every candidate's verdict and reason codes, the baseline: the
 * task's reference for ref_be), all candidate and agent text escaped (agents/html.c). */
int kg_search_write_html(const char *outdir, const struct kg_history *h, const struct kg_rec *w, const json_t *final,
			 const struct kg_backend *ref_be, kg_error *e);
/* The closing summary: verdicts, candidates per reason code, the winner (w, NULL when none) and,
 * when final is not NULL, its interval and whether it beat the other finalists significantly. */
void kg_search_summary(FILE *f, const struct kg_history *h, const struct kg_rec *w, const json_t *final,
		       const char *outdir);

/* ---- parallel verification (agents/workers.c) ---- */

struct kg_vjob {
	char path[PATH_MAX]; /* candidate source */
	char *report; /* out: the JSON report (malloc'ed) */
	char error[1024]; /* out: why there is no report */
	int usage; /* out: kg_verify refused the inputs (exit 2) */
	double seconds;
};

typedef void (*kg_vjob_done_fn)(struct kg_vjob *job, void *ctx);

/* Verifies every job, at most max_workers at a time, each kg_verify in its own forked process;
 * done() runs in this process as each finishes. When the backend (base->backend, else the first
 * candidate's extension) needs a GPU, each worker slot is pinned to one. */
int kg_verify_jobs(const struct kg_verify_opts *base, struct kg_vjob *jobs, int n, int max_workers, int timeout_s,
		   kg_vjob_done_fn done, void *ctx, kg_error *e);
/* How many verifications may run at once: the GPUs (CUDA_VISIBLE_DEVICES or /dev/nvidiaN) for a
 * backend that needs one, else the online CPUs. */
int kg_default_jobs(const struct kg_backend *be);

#endif
