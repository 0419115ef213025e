/* What a search leaves besides its history: OUTDIR/winner.<ext> and winner.json for the fastest
 * accepted candidate, rewritten whenever a faster one appears, and the closing summary. */
#include "agents/search.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/backend.h"

#define MAX_SOURCE (1u << 20)
#define MAX_REPORT (64u << 20)

int kg_search_write_winner(const char *outdir, const struct kg_backend *be, const struct kg_rec *w, kg_error *e)
{
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

void kg_search_summary(FILE *f, const struct kg_history *h, const struct kg_rec *w, const char *outdir,
		       const struct kg_backend *be)
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
	for (void *it = json_object_iter(codes); it; it = json_object_iter_next(codes, it))
		fprintf(f, "  %-28s %lld candidate%s\n", json_object_iter_key(it),
			(long long)json_integer_value(json_object_iter_value(it)),
			json_integer_value(json_object_iter_value(it)) == 1 ? "" : "s");
	json_decref(codes);
	if (w)
		fprintf(f, "winner: %.12s (round %d, idea %d)%s -> %s/winner%s\n", w->id, w->round, w->idea + 1,
			w->timed ? "" : " (untimed)", outdir, be->ext);
	if (w && w->timed)
		fprintf(f, "        %.4f ms, speedup %.2fx over the reference\n", w->median_ms, w->speedup);
	if (!w)
		fprintf(f, "no candidate was accepted\n");
	fflush(f);
}
