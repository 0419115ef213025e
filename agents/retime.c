/* The finalists' re-timing at the end of a search: the fastest accepted candidates verified and
 * timed again, interleaved, and the decision (agents/finalists.c) recorded in the history. */
#include "agents/search_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agents/finalists.h"
#include "kg_vocab.h"

#define FINAL_LEVEL 0.9

struct final_ctx {
	struct search *s;
	struct kg_vjob *jobs;
	struct kg_finalist *f;
	int nf;
};

/* One re-verification of a finalist: its speedup is a sample; a rejection for anything but
 * timing.tampered alone (which load from outside can cause, see kg_feedback_timing_only)
 * disqualifies it, since the same source was accepted before; no report drops the sample. */
static void final_done(struct kg_vjob *job, void *ctx)
{
	struct final_ctx *d = ctx;
	int j = (int)(job - d->jobs);
	struct kg_finalist *f = &d->f[j % d->nf];
	json_t *rep = job->report ? json_loads(job->report, 0, NULL) : NULL;
	json_t *sp = json_object_get(json_object_get(rep, "timing"), "speedup");
	json_int_t code = json_integer_value(json_object_get(rep, "exit_code"));
	if (rep && code == KG_EXIT_ACCEPTED && json_is_number(sp) && f->n < KG_MAX_RETIME) {
		f->samples[f->n++] = json_number_value(sp);
	} else if (rep && code == KG_EXIT_REJECTED && !kg_feedback_timing_only(job->report)) {
		json_t *rs = json_object_get(rep, "reasons");
		const char *c0 = json_string_value(json_object_get(json_array_get(rs, 0), "code"));
		if (!f->disqualified)
			snprintf(f->why, sizeof(f->why), "rejected when verified again: %s", c0 ? c0 : "?");
		f->disqualified = 1;
	} else {
		f->dropped++;
	}
	if (job->report) {
		char path[PATH_MAX];
		kg_error we = {0};
		kg_search_outpath(d->s, path, sizeof(path), "candidates/%s.retime-%d.report.json", f->id, j / d->nf + 1);
		kg_write_atomic(path, job->report, strlen(job->report), &we);
	}
	char what[300];
	if (f->disqualified)
		snprintf(what, sizeof(what), "%s", f->why);
	else if (json_is_number(sp) && code == KG_EXIT_ACCEPTED)
		snprintf(what, sizeof(what), "speedup %.3fx", json_number_value(sp));
	else
		snprintf(what, sizeof(what), "no figure (%.200s)", job->error[0] ? job->error : "timing.tampered only");
	kg_search_say(d->s, "  retimed  %.12s  %s\n", f->id, what);
	json_decref(rep);
}

static json_t *final_line(const struct kg_finalist *f, int nf, const struct kg_decision *d, int retime, const char *key)
{
	json_t *list = json_array(), *tied = json_array();
	for (int i = 0; i < nf; i++) {
		json_t *samples = json_array();
		for (int k = 0; k < f[i].n; k++)
			json_array_append_new(samples, json_real(f[i].samples[k]));
		json_t *x = json_pack("{s:s,s:i,s:o,s:f,s:[f,f],s:f,s:b,s:i}", "id", f[i].id, "n", f[i].n, "samples",
				      samples, "median", f[i].ci.median, "interval", f[i].ci.lo, f[i].ci.hi, "coverage",
				      f[i].ci.coverage, "disqualified", f[i].disqualified, "dropped", f[i].dropped);
		if (x && f[i].why[0])
			json_object_set_new(x, "why", json_string(f[i].why));
		json_array_append_new(list, x);
	}
	for (int i = 0; i < d->n_tied; i++)
		json_array_append_new(tied, json_string(f[d->tied[i]].id));
	return json_pack("{s:s,s:s,s:i,s:f,s:o,s:s?,s:b,s:o,s:b}", "event", "finalists", "key", key, "retime", retime,
			 "level", FINAL_LEVEL, "finalists", list, "winner", d->winner >= 0 ? f[d->winner].id : NULL,
			 "significant", d->significant, "tied", tied, "faster_than_reference", d->faster_than_reference);
}

/* The finalists (the fastest accepted and timed, by first measurement) re-verified o->retime times
 * each, interleaved (A B C A B C ...) and one at a time, so that drift and load hit all of them
 * alike; every verification times the candidate against the reference in one session, call by
 * call. The decision (agents/finalists.c) is recorded as a "finalists" line, which a resumed
 * search with the same finalists reuses. *w becomes the winner; *final the line (borrowed). */
int kg_search_retime(struct search *s, const struct kg_rec **w, const json_t **final, kg_error *e)
{
	const struct kg_search_opts *o = s->o;
	const struct kg_rec *best[KG_MAX_FINALISTS];
	struct kg_finalist f[KG_MAX_FINALISTS];
	const struct kg_backend *fbe[KG_MAX_FINALISTS]; /* what each was verified as */
	int nf = 0, rc = 0;
	int want = o->finalists < KG_MAX_FINALISTS ? o->finalists : KG_MAX_FINALISTS;
	int reps = o->retime < KG_MAX_RETIME ? o->retime : KG_MAX_RETIME;
	*final = NULL;
	if (want <= 0 || reps <= 0)
		return 0;
	int k = kg_history_best(&s->h, best, want);
	memset(f, 0, sizeof(f));
	char key[KG_MAX_FINALISTS * 65 + 1] = "";
	for (int i = 0; i < k; i++) {
		if (!best[i]->timed)
			continue;
		snprintf(f[nf].id, sizeof(f[nf].id), "%s", best[i]->id);
		f[nf].order = (int)(best[i] - s->h.recs);
		fbe[nf] = kg_backend_get(best[i]->backend);
		strcat(key, best[i]->id);
		nf++;
	}
	if (!nf)
		return 0;
	/* Done before (same finalists, same number of re-timings): the recorded decision stands. */
	json_t *old = s->h.finalists;
	const char *old_key = json_string_value(json_object_get(old, "key"));
	if (old && old_key && !strcmp(old_key, key) && json_integer_value(json_object_get(old, "retime")) == reps) {
		kg_search_say(s, "finalists: re-timed in an earlier run\n");
	} else {
		int n = nf * reps;
		struct kg_vjob *jobs = calloc((size_t)n, sizeof(*jobs));
		const struct kg_backend **be = calloc((size_t)n, sizeof(*be));
		if (!jobs || !be) {
			free(jobs);
			free(be);
			return kg_err(e, -ENOMEM, "out of memory");
		}
		for (int j = 0; j < n; j++) {
			be[j] = fbe[j % nf];
			kg_search_outpath(s, jobs[j].path, sizeof(jobs[j].path), "candidates/%s%s", f[j % nf].id, be[j]->ext);
		}
		kg_search_say(s, "finalists: re-verifying %d candidate%s %d times each, interleaved, one at a time\n",
			      nf, nf == 1 ? "" : "s", reps);
		struct kg_verify_opts vo = kg_search_verify_opts(o);
		struct final_ctx d = {.s = s, .jobs = jobs, .f = f, .nf = nf};
		rc = kg_search_run_jobs(s, &vo, jobs, be, n, 1, final_done, &d, e);
		for (int j = 0; j < n; j++)
			free(jobs[j].report);
		free(jobs);
		free(be);
		if (rc)
			return rc;
		struct kg_decision dec;
		kg_finalists_decide(f, nf, FINAL_LEVEL, &dec);
		json_t *line = final_line(f, nf, &dec, reps, key);
		rc = line ? kg_history_append(&s->h, line, e) : kg_err(e, -ENOMEM, "out of memory");
		json_decref(line);
		if (rc)
			return rc;
	}
	*final = s->h.finalists;
	const char *wid = json_string_value(json_object_get(s->h.finalists, "winner"));
	const struct kg_rec *x = wid ? kg_history_find(&s->h, wid) : NULL;
	if (x)
		*w = x;
	return 0;
}
