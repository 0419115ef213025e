/* The search loop's state and the helpers its files share (search.c: setup, rounds, verification;
 * propose.c: the agent's config and proposals; retime.c: the finalists' re-timing). Private to
 * agents/: the public interface is agents/search.h. */
#ifndef KG_SEARCH_INT_H
#define KG_SEARCH_INT_H

#include <stdio.h>

#include "agents/executor.h"
#include "agents/feedback.h"
#include "agents/search.h"
#include "policy/policy.h"
#include "verifier/plan/task.h"

#define KG_SEARCH_ROUND_MAX (KG_SEARCH_MAX_BRANCH * KG_SEARCH_MAX_PER_IDEA)

struct search {
	const struct kg_search_opts *o;
	struct kg_task task;
	struct kg_policy pol;
	const struct kg_backend *be; /* what the candidates are asked for (the task message's language) */
	const struct kg_backend *ref_be; /* the task's reference they are timed against */
	struct kg_history h;
	struct kg_agent *agent;
	struct kg_executor *x; /* where verifications run */
	uint8_t *config;
	size_t config_len;
	struct kg_pool task_pool;
	Kgate__V1__Task *task_msg;
	char best_id[65];
	int n_verified_now, usage_error;
	/* the round being verified, for the done callback */
	int round;
	Kgate__V1__ProposeResponse *resp;
	/* live progress (stderr) */
	int round_todo, round_done, workers;
	double secs_sum;
	int secs_n;
	int job_cand[KG_SEARCH_ROUND_MAX];
	char job_id[KG_SEARCH_ROUND_MAX][65];
	const struct kg_backend *job_be[KG_SEARCH_ROUND_MAX]; /* what each is verified as */
	kg_error werr;
};

/* One line to f whose text may quote an agent or a candidate, made safe (kg_text) and kept one
 * line of the terminal. A final newline of the caller's is kept. */
void kg_search_put_line(FILE *f, const char *text, size_t n);
/* Progress on stdout unless --quiet, made safe as kg_search_put_line does. */
void kg_search_say(const struct search *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* out = OUTDIR/<fmt...>. */
void kg_search_outpath(const struct search *s, char *out, size_t outsz, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The backend a proposal is verified as: a ModelNew module (Python) for a task given as a PyTorch
 * module is torch's, whatever the search's backend; anything else is the search's. */
const struct kg_backend *kg_search_cand_backend(const struct search *s, Kgate__V1__Language lang);
/* What every verification of the search shares: the task, its dims, the policy and its overrides. */
struct kg_verify_opts kg_search_verify_opts(const struct kg_search_opts *o);
/* Verifies jobs[0..n), job i as be[i]: each run of consecutive jobs of one backend goes to the
 * executor at once (it runs one backend at a time: its GPU pinning, the command it submits), with
 * workers at a time (0: the executor's default for that backend). */
int kg_search_run_jobs(struct search *s, const struct kg_verify_opts *base, struct kg_vjob *jobs,
		       const struct kg_backend *const *be, int n, int workers, kg_vjob_done_fn done, void *ctx,
		       kg_error *e);

/* ---- the agent (propose.c) ---- */

/* s->config: the AgentConfig message from the search's settings. */
int kg_search_agent_config(struct search *s, kg_error *e);
/* s->resp: the round's proposals, the saved ones of an interrupted run or a fresh propose call
 * (the agent opened on first use); its response is saved before anything is verified. */
int kg_search_get_proposals(struct search *s, int round, kg_error *e);

/* ---- the finalists (retime.c) ---- */

/* The fastest accepted re-verified and re-timed; *w becomes the winner where the re-timing names
 * one, *final the "finalists" line (borrowed from the history), NULL when none ran. */
int kg_search_retime(struct search *s, const struct kg_rec **w, const json_t **final, kg_error *e);

#endif
