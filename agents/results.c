/* What a search leaves besides its history: OUTDIR/winner.<ext> and winner.json for the fastest
 * accepted candidate, rewritten whenever a faster one appears, and the closing summary. */
#include "agents/search.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/backend.h"

#define MAX_SOURCE (1u << 20)
#define MAX_REPORT (64u << 20)

int kg_search_write_winner(const char *outdir, const struct kg_rec *w, const json_t *final, kg_error *e)
{
	const struct kg_backend *be = kg_backend_get(w->backend);
	char src[PATH_MAX], dst[PATH_MAX], rep[PATH_MAX];
	char *text = NULL, *report = NULL, *out = NULL;
	size_t len = 0;
	int rc;
	const char *file = json_string_value(json_object_get(w->j, "file"));
	snprintf(src, sizeof(src), "%s/%s", outdir, file ? file : "");
	if ((rc = kg_read_file(src, MAX_SOURCE, &text, &len, e)))
		return rc;
	snprintf(dst, sizeof(dst), "%s/winner%s", outdir, be->ext);
	if ((rc = kg_write_atomic(dst, text, len, e)))
		goto out;
	/* The history line as it is (the report's own verdict, reasons and timing), where it came
	 * from, and the whole report beside it. */
	json_t *j = json_deep_copy(w->j);
	const char *rp = json_string_value(json_object_get(w->j, "report"));
	snprintf(rep, sizeof(rep), "%s/%s", outdir, rp ? rp : "");
	json_t *full = rp && !kg_read_file(rep, MAX_REPORT, &report, NULL, NULL) ? json_loads(report, 0, NULL) : NULL;
	json_object_del(j, "event");
	json_object_set_new(j, "winner", json_sprintf("winner%s", be->ext));
	if (full)
		json_object_set_new(j, "full_report", full);
	if (final)
		json_object_set_new(j, "finalists", json_deep_copy(final));
	out = json_dumps(j, JSON_INDENT(2));
	json_decref(j);
	if (!out) {
		rc = kg_err(e, -ENOMEM, "out of memory");
		goto out;
	}
	snprintf(dst, sizeof(dst), "%s/winner.json", outdir);
	rc = kg_write_atomic(dst, out, strlen(out), e);
out:
	free(text);
	free(report);
	free(out);
	return rc;
}

/* The finalists' entry for id in a "finalists" line, NULL when it was not one. */
static json_t *finalist(const json_t *final, const char *id)
{
	json_t *list = json_object_get(final, "finalists");
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *x = json_array_get(list, i);
		const char *xi = json_string_value(json_object_get(x, "id"));
		if (xi && !strcmp(xi, id))
			return x;
	}
	return NULL;
}

static void interval(FILE *f, const json_t *x)
{
	json_t *ci = json_object_get(x, "interval");
	fprintf(f, "%.3fx [%.3f, %.3f]", json_number_value(json_object_get(x, "median")),
		json_number_value(json_array_get(ci, 0)), json_number_value(json_array_get(ci, 1)));
}

/* What the re-timing of the finalists says of the winner: its interval, and whether it is faster
 * than the others beyond their spread or only one of several that cannot be told apart. */
static void final_summary(FILE *f, const struct kg_rec *w, const json_t *final)
{
	json_t *me = finalist(final, w->id);
	if (!me || !json_integer_value(json_object_get(me, "n"))) {
		fprintf(f, "        re-timing gave no figures; the winner is the fastest by its first measurement\n");
		return;
	}
	fprintf(f, "        re-timed %lld times, interleaved with the other finalists, each in one session with the "
		"reference: speedup ",
		(long long)json_integer_value(json_object_get(me, "n")));
	interval(f, me);
	fprintf(f, " (%.0f%% interval of the median)\n", 100 * json_number_value(json_object_get(me, "coverage")));
	json_t *tied = json_object_get(final, "tied");
	if (json_array_size(json_object_get(final, "finalists")) == 1) {
		fprintf(f, "        the only finalist\n");
	} else if (json_is_true(json_object_get(final, "significant"))) {
		fprintf(f, "        faster than every other finalist beyond the measured spread\n");
	} else {
		fprintf(f, "        no significant difference from");
		for (size_t i = 0; i < json_array_size(tied); i++) {
			const char *id = json_string_value(json_array_get(tied, i));
			fprintf(f, "%s %.12s ", i ? "," : "", id ? id : "?");
			interval(f, finalist(final, id ? id : ""));
		}
		fprintf(f, ": the intervals overlap; the earliest of them is kept\n");
	}
	fprintf(f, "        %s\n", json_is_true(json_object_get(final, "faster_than_reference"))
				       ? "faster than the reference beyond the measured spread"
				       : "not faster than the reference beyond the measured spread");
}

void kg_search_summary(FILE *f, const struct kg_history *h, const struct kg_rec *w, const json_t *final,
		       const char *outdir)
{
	int acc = 0, rej = 0, err = 0;
	json_t *codes = json_object();
	for (int i = 0; i < h->n; i++) {
		const struct kg_rec *r = &h->recs[i];
		acc += r->verdict == KG_REC_ACCEPTED;
		rej += r->verdict == KG_REC_REJECTED;
		err += r->verdict == KG_REC_ERROR;
		/* Candidates per reason code, not reasons: one candidate fails many trials. */
		json_t *rs = json_object_get(r->j, "reasons"), *seen = json_object();
		for (size_t k = 0; k < json_array_size(rs); k++) {
			const char *c = json_string_value(json_object_get(json_array_get(rs, k), "code"));
			if (c && !json_object_get(seen, c)) {
				json_object_set_new(seen, c, json_true());
				json_object_set_new(codes, c, json_integer(json_integer_value(json_object_get(codes, c)) + 1));
			}
		}
		json_decref(seen);
	}
	fprintf(f, "summary: %d candidates verified: %d accepted, %d rejected, %d not verified (infrastructure)\n", h->n,
		acc, rej, err);
	if (h->duplicates)
		fprintf(f, "  %d proposal%s identical to a source already verified: verified once, the result shared\n",
			h->duplicates, h->duplicates == 1 ? " was" : "s were");
	for (void *it = json_object_iter(codes); it; it = json_object_iter_next(codes, it))
		fprintf(f, "  %-28s %lld candidate%s\n", json_object_iter_key(it),
			(long long)json_integer_value(json_object_iter_value(it)),
			json_integer_value(json_object_iter_value(it)) == 1 ? "" : "s");
	json_decref(codes);
	if (w)
		fprintf(f, "winner: %.12s (round %d, idea %d)%s -> %s/winner%s\n", w->id, w->round, w->idea + 1,
			w->timed ? "" : " (untimed)", outdir, kg_backend_get(w->backend)->ext);
	if (w && w->timed)
		fprintf(f, "        first measurement %.4f ms, speedup %.2fx over the reference\n", w->median_ms,
			w->speedup);
	if (w && w->timed && final)
		final_summary(f, w, final);
	if (!w)
		fprintf(f, "no candidate was accepted\n");
	fprintf(f, "report: %s/report.html\n", outdir);
	fflush(f);
}
