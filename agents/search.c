/* The search loop: each round asks the agent for B ideas x N candidates (with the whole history
 * and the current seeds), verifies the new ones in parallel, appends every verdict to
 * OUTDIR/history.jsonl, and keeps the fastest accepted candidates as the next round's seeds and
 * OUTDIR/winner.*. Rounds already recorded, and candidates already verified (by SHA-256 of their
 * source), are never redone, so an interrupted search resumes where it stopped. */
#include "agents/search_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kg_sha256.h"
#include "kg_text.h"
#include "policy/policy.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/gpu.h"
#include "verifier/plan/resolve.h"
#include "verifier/plan/task.h"

#define MAX_SOURCE (1u << 20)

/* One line to f whose text may quote an agent or a candidate (names, errors, the agent's log): made
 * safe as in every report (kg_text), a newline in it escaped too, so that it stays one line of the
 * terminal and cannot paint another. A final newline of the caller's is kept. */
void kg_search_put_line(FILE *f, const char *text, size_t n)
{
	int nl = n && text[n - 1] == '\n';
	kg_buf t = {0};
	if (kg_text_safe(&t, text, n - (size_t)nl, KG_TEXT_ONELINE) >= 0)
		fputs(kg_buf_str(&t), f);
	if (nl)
		fputc('\n', f);
	kg_buf_free(&t);
}

void kg_search_say(const struct search *s, const char *fmt, ...)
{
	if (s->o->quiet)
		return;
	kg_buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	int rc = kg_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (!rc)
		kg_search_put_line(stdout, kg_buf_str(&b), b.len);
	kg_buf_free(&b);
	fflush(stdout);
}

void kg_search_outpath(const struct search *s, char *out, size_t outsz, const char *fmt, ...)
{
	char rel[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(out, outsz, "%s/%s", s->o->outdir, rel);
}

/* ---- setup ---- */

/* 1 when a GPU is present, probed (a child process that initialises the driver) only when the
 * task has a reference for a GPU backend: otherwise the answer could not change the default. */
static int probe_gpu(const struct kg_task *t)
{
	for (int i = 0; i < KG_BACKEND_COUNT_; i++)
		if (kg_backend_get((enum kg_backend_id)i)->needs_gpu && t->ref[i][0]) {
			struct kg_gpu_info g;
			kg_gpu_probe(&g);
			return g.present;
		}
	return 0;
}

/* The backend asked for, else the default for the task on this host. The reference is the
 * backend's own where the task has one, else its PyTorch Model (as kg_verify picks it), which is
 * also what a ModelNew proposal is timed against. */
static int pick_backend(struct search *s, kg_error *e)
{
	int rc = 0;
	if (s->o->backend)
		rc = kg_resolve_backend(s->o->backend, NULL, &s->be, e);
	else
		s->be = kg_resolve_default_backend(&s->task, probe_gpu(&s->task));
	if (!rc && s->be->module_tasks_only && !s->task.ref[KG_BACKEND_TORCH][0])
		rc = kg_err(e, -EINVAL,
			    "--backend %s: a %s candidate (a KernelBench ModelNew module) needs a task given as a "
			    "PyTorch module (PROBLEM.py) or imported from one; task '%s' is not",
			    s->be->name, s->be->name, s->task.name);
	if (!rc)
		s->ref_be = s->task.ref[s->be->id][0] || !s->task.ref[KG_BACKEND_TORCH][0] ? s->be
											     : kg_backend_get(KG_BACKEND_TORCH);
	return rc;
}

const struct kg_backend *kg_search_cand_backend(const struct search *s, Kgate__V1__Language lang)
{
	if (lang == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON && s->task.ref[KG_BACKEND_TORCH][0])
		return kg_backend_get(KG_BACKEND_TORCH);
	return s->be;
}

/* The header candidates are compiled against, as the verifier finds it (source tree, build tree,
 * or the installed copy in share/kgate/include or the -dev package's include dir). */
static int abi_header(char *out, size_t outsz)
{
	char dir[PATH_MAX];
	int rc = kg_path_include(dir, sizeof(dir));
	if (!rc && snprintf(out, outsz, "%s/kgate/kernel.h", dir) >= (int)outsz)
		rc = -ENAMETOOLONG;
	return rc;
}

/* OUTDIR/search.json records what the directory is a search of; resuming a different one is a
 * usage error rather than a silently mixed history. */
static int check_meta(struct search *s, kg_error *e)
{
	char path[PATH_MAX];
	kg_search_outpath(s, path, sizeof(path), "search.json");
	if (!access(path, F_OK)) {
		json_t *m = json_load_file(path, 0, NULL);
		const char *task = json_string_value(json_object_get(m, "task"));
		const char *be = json_string_value(json_object_get(m, "backend"));
		/* a module task's dims are part of what it is: other dims, other shapes and reference */
		const char *dims = json_string_value(json_object_get(m, "dims"));
		int bad = !m || !task || !be || strcmp(task, s->task.name) || strcmp(be, s->be->name) ||
			  strcmp(dims ? dims : "", s->o->dims ? s->o->dims : "");
		if (bad)
			kg_err(e, -EEXIST, "%s holds a search for task %s (%s%s%s); use another --out directory",
			       s->o->outdir, task ? task : "?", be ? be : "?", dims ? ", --dims " : "", dims ? dims : "");
		json_decref(m);
		return bad ? -EEXIST : 0;
	}
	json_t *m = json_pack("{s:i,s:s,s:s,s:s,s:s,s:i,s:i}", "kgate_search", 1, "task", s->task.name, "backend",
			      s->be->name, "agent", s->o->agent, "policy", s->pol.path[0] ? s->pol.path : "(built-in defaults)",
			      "branch", s->o->branch, "candidates_per_idea", s->o->per_idea);
	if (m && s->o->dims)
		json_object_set_new(m, "dims", json_string(s->o->dims));
	char *text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
	json_decref(m);
	if (!text)
		return kg_err(e, -ENOMEM, "out of memory");
	int rc = kg_write_atomic(path, text, strlen(text), e);
	free(text);
	return rc;
}

/* ---- verifying ---- */

struct done_ctx {
	struct search *s;
	struct kg_vjob *jobs;
	int parallel; /* verifications ran side by side */
	int n_recheck;
	int recheck[KG_SEARCH_ROUND_MAX];
};

/* One line on stderr after each verification: round, verified / proposed in it, the best so far
 * with the interval its own session measured (the reference's median over the candidate's p90
 * and p10), and an estimate of the time left at the pace so far. */
static void progress(struct search *s)
{
	if (s->o->quiet)
		return;
	const struct kg_rec *best[1];
	char bests[160] = "none accepted yet";
	if (kg_history_best(&s->h, best, 1) && best[0]->timed) {
		json_t *t = json_object_get(best[0]->j, "timing");
		json_t *c = json_object_get(t, "candidate");
		double ref = json_number_value(json_object_get(json_object_get(t, "reference"), "median_ms"));
		double p10 = json_number_value(json_object_get(c, "p10_ms")), p90 = json_number_value(json_object_get(c, "p90_ms"));
		if (p10 > 0 && p90 > 0)
			snprintf(bests, sizeof(bests), "best %.2fx [%.2f, %.2f]", best[0]->speedup, ref / p90, ref / p10);
		else
			snprintf(bests, sizeof(bests), "best %.2fx", best[0]->speedup);
	} else if (kg_history_best(&s->h, best, 1)) {
		snprintf(bests, sizeof(bests), "best untimed");
	}
	int left = (s->round_todo - s->round_done) + (s->o->rounds - s->round) * s->o->branch * s->o->per_idea;
	double per = s->secs_n ? s->secs_sum / s->secs_n : 0;
	int w = s->workers > 0 ? s->workers : 1;
	fprintf(stderr, "[round %d/%d] verified %d/%d | %s | about %.0f s left\n", s->round, s->o->rounds,
		s->round_done, s->round_todo, bests, per * left / w);
}

static void record(struct kg_vjob *job, void *ctx)
{
	struct done_ctx *d = ctx;
	struct search *s = d->s;
	int j = (int)(job - d->jobs);
	if (d->parallel && kg_feedback_timing_only(job->report)) {
		kg_search_say(s,
			      "  recheck  %.12s  timing.tampered while verifications ran in parallel; verifying it again "
			      "alone\n",
			      s->job_id[j]);
		d->recheck[d->n_recheck++] = j;
		return;
	}
	const Kgate__V1__Candidate *c = s->resp->candidates[s->job_cand[j]];
	const char *idea = c->idea < s->resp->n_ideas ? s->resp->ideas[c->idea] : "";
	char file[128], rep[160];
	snprintf(file, sizeof(file), "candidates/%s%s", s->job_id[j], s->job_be[j]->ext);
	snprintf(rep, sizeof(rep), "candidates/%s.report.json", s->job_id[j]);
	/* Where it came from first, then what the verifier said. "language" is the source language,
	 * the word the task manifest keys its references by ("c", "cuda", "torch"). */
	json_t *line = json_pack("{s:s,s:i,s:i,s:s,s:s,s:s,s:s}", "event", "candidate", "round", s->round, "idea",
				 (int)c->idea, "idea_text", idea, "id", s->job_id[j], "file", file, "language",
				 s->job_be[j]->ref_key);
	json_t *verdict = kg_feedback_line(job->report, job->error, job->usage);
	if (!line || !verdict) {
		json_decref(line);
		json_decref(verdict);
		if (!s->werr.msg[0])
			kg_err(&s->werr, -ENOMEM, "out of memory");
		return;
	}
	if (c->name[0])
		json_object_set_new(line, "name", json_string(c->name));
	json_object_update(line, verdict);
	json_decref(verdict);
	json_object_set_new(line, "seconds", json_real(job->seconds));
	if (job->report) {
		char path[PATH_MAX];
		kg_error we = {0};
		kg_search_outpath(s, path, sizeof(path), "%s", rep);
		if (!kg_write_atomic(path, job->report, strlen(job->report), &we))
			json_object_set_new(line, "report", json_string(rep));
	}
	if (job->usage)
		s->usage_error = 1;
	kg_error e = {0};
	if (kg_history_append(&s->h, line, &e) && !s->werr.msg[0])
		s->werr = e;
	s->n_verified_now++;
	const struct kg_rec *r = kg_history_find(&s->h, s->job_id[j]);
	if (r && !s->o->quiet) {
		json_t *reasons = json_object_get(line, "reasons");
		char what[200] = "";
		size_t len = 0;
		/* Each code once, in the order found. */
		for (size_t i = 0; i < json_array_size(reasons) && len < sizeof(what) - 40; i++) {
			const char *code = json_string_value(json_object_get(json_array_get(reasons, i), "code"));
			char probe[64];
			snprintf(probe, sizeof(probe), " %s ", code ? code : "?");
			char padded[sizeof(what) + 2];
			snprintf(padded, sizeof(padded), " %s ", what);
			if (!strstr(padded, probe))
				len += (size_t)snprintf(what + len, sizeof(what) - len, "%s%s", len ? " " : "", code ? code : "?");
		}
		if (r->verdict == KG_REC_ACCEPTED && r->timed)
			snprintf(what, sizeof(what), "%.4f ms, speedup %.2fx", r->median_ms, r->speedup);
		else if (r->verdict == KG_REC_ERROR)
			snprintf(what, sizeof(what), "%.150s", json_string_value(json_object_get(line, "error")));
		kg_search_say(s, "  %-8s %.12s  idea %d  %s\n",
			      r->verdict == KG_REC_ACCEPTED   ? "accepted"
			      : r->verdict == KG_REC_REJECTED ? "rejected"
							      : "error",
			      r->id, r->idea + 1, what);
	}
	json_decref(line);
	s->round_done++;
	s->secs_sum += job->seconds;
	s->secs_n++;
	progress(s);
}

/* Writes a candidate's source to candidates/<sha256>.<ext> (once: the name is its content). */
static int store_candidate(struct search *s, const char *src, const struct kg_backend *be, char id[65], kg_error *e)
{
	char path[PATH_MAX];
	kg_sha256_hex(src, strlen(src), id);
	kg_search_outpath(s, path, sizeof(path), "candidates/%s%s", id, be->ext);
	if (!access(path, R_OK))
		return 0;
	return kg_write_atomic(path, src, strlen(src), e);
}

struct kg_verify_opts kg_search_verify_opts(const struct kg_search_opts *o)
{
	return (struct kg_verify_opts){
		.task = o->task,
		.dims = o->dims,
		.policy = o->policy,
		.iterations = o->iterations,
		.trials = o->trials,
		.no_cache = o->no_cache,
		/* a round's candidates are ranked by their speedup over the reference: no torch.compile
		 * warm-up per candidate */
		.baselines = KG_BASELINES_NONE,
	};
}

int kg_search_run_jobs(struct search *s, const struct kg_verify_opts *base, struct kg_vjob *jobs,
		       const struct kg_backend *const *be, int n, int workers, kg_vjob_done_fn done, void *ctx,
		       kg_error *e)
{
	int rc = 0;
	for (int i = 0, k; i < n && !rc; i = k) {
		for (k = i + 1; k < n && be[k] == be[i];)
			k++;
		struct kg_verify_opts vo = *base;
		vo.backend = be[i]->name;
		int w = workers > 0 ? workers : s->x->ops->default_jobs(s->x, be[i]);
		rc = s->x->ops->run(s->x, &vo, jobs + i, k - i, w, s->o->verify_timeout_s, done, ctx, e);
	}
	return rc;
}

/* Where a job's backend goes in the round: the search's own first, then the others by id. */
static int group_key(const struct search *s, int j)
{
	return s->job_be[j] == s->be ? -1 : (int)s->job_be[j]->id;
}

/* The round's jobs (s->job_*) reordered, stably (an insertion sort: a round is small, and mixed
 * backends rare), so that each backend's are consecutive: kg_search_run_jobs then hands each
 * backend's to the executor at once. */
static void group_jobs(struct search *s, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && group_key(s, j - 1) > group_key(s, j); j--) {
			char id[65];
			memcpy(id, s->job_id[j], sizeof(id));
			memcpy(s->job_id[j], s->job_id[j - 1], sizeof(id));
			memcpy(s->job_id[j - 1], id, sizeof(id));
			int c = s->job_cand[j];
			s->job_cand[j] = s->job_cand[j - 1];
			s->job_cand[j - 1] = c;
			const struct kg_backend *b = s->job_be[j];
			s->job_be[j] = s->job_be[j - 1];
			s->job_be[j - 1] = b;
		}
}

static int verify_round(struct search *s, int round, kg_error *e)
{
	const struct kg_search_opts *o = s->o;
	Kgate__V1__ProposeResponse *r = s->resp;
	size_t cap = (size_t)(o->branch * o->per_idea);
	struct kg_vjob *jobs = calloc(cap ? cap : 1, sizeof(*jobs));
	json_t *ids = json_array();
	int n = 0, reused = 0, rc = 0;
	if (!jobs || !ids) {
		rc = kg_err(e, -ENOMEM, "out of memory");
		goto out;
	}
	if (r->n_candidates > cap)
		kg_search_say(s, "round %d: the agent proposed %zu candidates, verifying the first %zu\n", round,
			      r->n_candidates, cap);
	for (size_t i = 0; i < r->n_candidates && i < cap; i++) {
		const char *src = r->candidates[i]->source;
		const struct kg_backend *be = kg_search_cand_backend(s, r->candidates[i]->language);
		char id[65];
		if (strlen(src) > MAX_SOURCE) {
			kg_search_say(s, "  skipped  candidate %zu: larger than %u bytes\n", i + 1, MAX_SOURCE);
			continue;
		}
		if ((rc = store_candidate(s, src, be, id, e)))
			goto out;
		json_array_append_new(ids, json_string(id));
		int dup = 0;
		for (int k = 0; k < n && !dup; k++)
			dup = !strcmp(s->job_id[k], id);
		const struct kg_rec *old = kg_history_find(&s->h, id);
		if (dup || (old && old->verdict != KG_REC_ERROR)) {
			/* Identical sources are verified once and share that result; the copy is recorded
			 * so that the history says where each proposal went. */
			const Kgate__V1__Candidate *c = r->candidates[i];
			if (!dup && old->round == round && old->idea == (int)c->idea) {
				reused++; /* this very proposal, verified before an interruption */
				continue;
			}
			json_t *line = json_pack("{s:s,s:i,s:i,s:s,s:s}", "event", "duplicate", "round", round, "idea",
						 (int)c->idea, "id", id, "of", dup ? "this round" : "an earlier round");
			if (line && c->name[0])
				json_object_set_new(line, "name", json_string(c->name));
			rc = line ? kg_history_append(&s->h, line, e) : kg_err(e, -ENOMEM, "out of memory");
			json_decref(line);
			if (rc)
				goto out;
			reused++;
			continue;
		}
		snprintf(s->job_id[n], sizeof(s->job_id[n]), "%s", id);
		s->job_cand[n] = (int)i;
		s->job_be[n] = be;
		n++;
	}
	group_jobs(s, n);
	for (int j = 0; j < n; j++)
		kg_search_outpath(s, jobs[j].path, sizeof(jobs[j].path), "candidates/%s%s", s->job_id[j],
				  s->job_be[j]->ext);
	int workers = o->jobs > 0 ? o->jobs : s->x->ops->default_jobs(s->x, n ? s->job_be[0] : s->be);
	kg_search_say(s, "round %d: %zu proposed, %d to verify (%d already verified)", round, r->n_candidates, n, reused);
	kg_search_say(s, n > 1 ? ", %d at a time\n" : "\n", workers < n ? workers : n);
	struct kg_verify_opts vo = kg_search_verify_opts(o);
	struct done_ctx d = {.s = s, .jobs = jobs, .parallel = workers > 1 && n > 1};
	s->round = round;
	s->round_todo = n;
	s->round_done = 0;
	s->workers = workers < n ? workers : n;
	s->werr = (kg_error){0};
	rc = kg_search_run_jobs(s, &vo, jobs, s->job_be, n, o->jobs, record, &d, e);
	/* Second, serial pass: its verdict is the one recorded, whatever it is. */
	d.parallel = 0;
	for (int k = 0; k < d.n_recheck && !rc; k++) {
		struct kg_vjob *job = &jobs[d.recheck[k]];
		free(job->report);
		job->report = NULL;
		job->error[0] = '\0';
		rc = kg_search_run_jobs(s, &vo, job, &s->job_be[d.recheck[k]], 1, 1, record, &d, e);
	}
	if (!rc && s->werr.msg[0])
		rc = kg_err(e, s->werr.code, "%s", s->werr.msg);
	if (rc)
		goto out;
	/* A round with an infrastructure error stays open: a resumed search re-verifies those
	 * candidates (from the saved proposals) once the infrastructure works. */
	for (int i = 0; i < n; i++) {
		const struct kg_rec *x = kg_history_find(&s->h, s->job_id[i]);
		if (!x || x->verdict == KG_REC_ERROR) {
			kg_search_say(s, "round %d: left open: %s could not be verified\n", round,
				      x ? "some candidates" : "a candidate");
			goto out;
		}
	}
	/* The round is done: its line makes a resumed search skip it. */
	const struct kg_rec *best[KG_SEARCH_MAX_BRANCH * 4];
	int k = kg_history_best(&s->h, best, o->keep);
	json_t *seeds = json_array();
	for (int i = 0; i < k; i++)
		json_array_append_new(seeds, json_string(best[i]->id));
	json_t *line = json_pack("{s:s,s:i,s:O,s:o,s:s}", "event", "round", "round", round, "candidates", ids, "seeds",
				 seeds, "agent_log", r->log);
	rc = line ? kg_history_append(&s->h, line, e) : kg_err(e, -ENOMEM, "out of memory");
	json_decref(line);
out:
	for (int i = 0; i < n; i++)
		free(jobs[i].report);
	free(jobs);
	json_decref(ids);
	return rc;
}

int kg_search(const struct kg_search_opts *o, kg_error *e)
{
	/* on the heap: the task it holds declares up to KG_MAX_TENSORS tensors each way (2.5 MB) */
	struct search *s = calloc(1, sizeof(*s));
	if (!s) {
		kg_err(e, -ENOMEM, "out of memory");
		return KG_EXIT_INTERNAL;
	}
	s->o = o;
	s->h.fd = -1;
	int rc, exit_code = KG_EXIT_USAGE;
	char path[PATH_MAX], abi[PATH_MAX] = "";

	if ((rc = kg_resolve_policy(o->policy, &s->pol, e)) ||
	    (rc = kg_resolve_task_dims(o->task, o->dims, &s->task, e)) || (rc = pick_backend(s, e)))
		goto out;
	kg_search_outpath(s, path, sizeof(path), "candidates");
	if ((rc = kg_mkdirs(path, 0755, e)))
		goto out;
	kg_search_outpath(s, path, sizeof(path), "rounds");
	if ((rc = kg_mkdirs(path, 0755, e)) || (rc = check_meta(s, e)))
		goto out;
	abi_header(abi, sizeof(abi));
	if (!(s->task_msg = kg_feedback_task(&s->task_pool, &s->task, s->be, s->pol.shape_set,
					     s->pol.shapes == KG_SHAPES_VARIANTS, abi))) {
		kg_err(e, -ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = kg_search_agent_config(s, e)))
		goto out;
	struct kg_executor_opts xo = {
		.name = o->executor,
		.outdir = o->outdir,
		.exe = o->host_exe,
		.partition = o->slurm_partition,
		.slurm_args = o->slurm_args,
	};
	if ((rc = kg_executor_open(&xo, &s->x, e)))
		goto out;
	exit_code = KG_EXIT_INTERNAL;
	if ((rc = kg_history_open(&s->h, o->outdir, e)))
		goto out;
	kg_search_say(s,
		      "kgate search: task %s (%s), agent %s, %d rounds x %d ideas x %d candidates, executor %s, output "
		      "in %s\n",
		      s->task.name, s->be->name, o->agent, o->rounds, o->branch, o->per_idea, s->x->ops->name, o->outdir);
	if (s->h.n)
		kg_search_say(s, "resuming: %d candidates already verified%s\n", s->h.n,
			      s->h.skipped ? " (an unfinished history line was dropped)" : "");

	int agent_errors = 0;
	for (int round = 1; round <= o->rounds; round++) {
		if (s->h.done[round]) {
			kg_search_say(s, "round %d: done in an earlier run\n", round);
			continue;
		}
		kg_error ae = {0};
		rc = kg_search_get_proposals(s, round, &ae);
		if (rc && !s->agent) {
			/* The plugin cannot even be loaded or created: a configuration problem. */
			kg_err(e, rc, "%s", ae.msg);
			exit_code = KG_EXIT_USAGE;
			goto out;
		}
		if (rc) {
			/* A crash, hang or failure of the agent costs this round only. */
			agent_errors++;
			fprintf(stderr, "kgate search: round %d: ", round);
			kg_search_put_line(stderr, ae.msg, strlen(ae.msg));
			fputc('\n', stderr);
			json_t *line = json_pack("{s:s,s:i,s:s}", "event", "agent_error", "round", round, "error", ae.msg);
			if (line && (rc = kg_history_append(&s->h, line, e))) {
				json_decref(line);
				goto out;
			}
			json_decref(line);
			continue;
		}
		if (!s->resp->n_candidates) {
			kg_search_say(s, "round %d: the agent has nothing more to propose; stopping\n", round);
			kgate__v1__propose_response__free_unpacked(s->resp, NULL);
			s->resp = NULL;
			break;
		}
		rc = verify_round(s, round, e);
		kgate__v1__propose_response__free_unpacked(s->resp, NULL);
		s->resp = NULL;
		if (rc)
			goto out;
		if (s->usage_error) {
			kg_err(e, -EINVAL, "kg_verify refused its inputs (see %s/history.jsonl); stopping", o->outdir);
			exit_code = KG_EXIT_USAGE;
			goto out;
		}
		const struct kg_rec *best[1];
		if (kg_history_best(&s->h, best, 1) && strcmp(best[0]->id, s->best_id)) {
			snprintf(s->best_id, sizeof(s->best_id), "%s", best[0]->id);
			if ((rc = kg_search_write_winner(o->outdir, best[0], NULL, e)))
				goto out;
			kg_search_say(s, "round %d: best so far %.12s\n", round, best[0]->id);
		}
	}

	const struct kg_rec *best[1];
	const json_t *final = NULL;
	int have = kg_history_best(&s->h, best, 1);
	if (have && (rc = kg_search_retime(s, &best[0], &final, e)))
		goto out;
	if (have && (final || strcmp(best[0]->id, s->best_id)) &&
	    (rc = kg_search_write_winner(o->outdir, best[0], final, e)))
		goto out;
	if ((rc = kg_search_write_html(o->outdir, &s->h, have ? best[0] : NULL, final, s->ref_be, e)))
		goto out;
	if (!o->quiet)
		kg_search_summary(stdout, &s->h, have ? best[0] : NULL, final, o->outdir);
	int rejected = 0;
	for (int i = 0; i < s->h.n; i++)
		rejected += s->h.recs[i].verdict == KG_REC_REJECTED;
	if (have)
		exit_code = KG_EXIT_ACCEPTED;
	else if (rejected)
		exit_code = KG_EXIT_REJECTED;
	else {
		exit_code = KG_EXIT_INTERNAL;
		kg_err(e, -EIO, "%s", s->h.n ? "no candidate could be verified (infrastructure errors; see history.jsonl)"
			       : agent_errors ? "the agent failed in every round"
					      : "the agent proposed no candidates");
	}
out:
	if (s->resp)
		kgate__v1__propose_response__free_unpacked(s->resp, NULL);
	kg_agent_close(s->agent);
	kg_executor_close(s->x);
	kg_history_close(&s->h);
	kg_pool_free(&s->task_pool);
	free(s->config);
	free(s);
	return exit_code;
}
