/* OUTDIR/report.html: the search for a human, in one self-contained file (inline CSS and SVG, no
 * script, nothing fetched): a per-round speedup plot, the winner's source with its verdict and
 * interval, every candidate's verdict and reason codes, and the baseline. Everything that came
 * from a candidate or an agent is escaped, as in every report (kg_text), and then as markup. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/search.h"
#include "kg_text.h"
#include "verifier/plan/backend.h"

#define MAX_SOURCE (1u << 20)

/* Text for an element or a quoted attribute: made safe as in every report (kg_text: control
 * characters, terminal escapes among them, and invalid UTF-8 as \xNN, bidirectional overrides and
 * other invisible characters as \uNNNN, so that the winner's source reads in the order it runs),
 * then the markup characters as entities. */
static int esc(kg_buf *b, const char *s)
{
	char *t = kg_text_safe_dup(s ? s : "", KG_TEXT_MULTILINE, NULL);
	if (!t)
		return -ENOMEM;
	int rc = 0;
	const char *run = t;
	for (const char *p = t; *p && !rc; p++) {
		const char *ent = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : *p == '"' ? "&quot;"
				: *p == '\'' ? "&#39;" : NULL;
		if (!ent)
			continue;
		if (p > run)
			rc = kg_buf_append(b, run, (size_t)(p - run));
		if (!rc)
			rc = kg_buf_printf(b, "%s", ent);
		run = p + 1;
	}
	if (!rc && *run)
		rc = kg_buf_append(b, run, strlen(run));
	free(t);
	return rc;
}

static const char *jstr(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* Speedups by round as points, the best so far as a line; axes with the rounds and a 1x line. */
static void plot(kg_buf *b, const struct kg_history *h)
{
	int rounds = 1;
	double ymax = 1.0;
	for (int i = 0; i < h->n; i++) {
		const struct kg_rec *r = &h->recs[i];
		if (r->round > rounds)
			rounds = r->round;
		if (r->verdict == KG_REC_ACCEPTED && r->timed && isfinite(r->speedup) && r->speedup > ymax)
			ymax = r->speedup;
	}
	ymax *= 1.1;
	const double W = 640, H = 300, L = 50, B = 30, T = 10, R = 10;
#define X(round) (L + ((rounds > 1 ? (double)((round)-1) / (rounds - 1) : 0.5) * (W - L - R)))
#define Y(v) (H - B - (v) / ymax * (H - B - T))
	kg_buf_printf(b, "<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
			 "aria-label=\"speedup per round\">\n", W, H, W, H);
	kg_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", L, H - B, W - R, H - B);
	kg_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", L, T, L, H - B);
	kg_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"4\"/>\n",
		      L, Y(1.0), W - R, Y(1.0));
	kg_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">1x</text>\n", L - 4, Y(1.0) + 4);
	kg_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.2fx</text>\n", L - 4, T + 10,
		      ymax);
	for (int r = 1; r <= rounds; r++)
		kg_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">round %d</text>\n", X(r),
			      H - B + 16, r);
	double best = 0;
	kg_buf path = {0};
	for (int r = 1; r <= rounds; r++) {
		for (int i = 0; i < h->n; i++) {
			const struct kg_rec *x = &h->recs[i];
			if (x->round != r || x->verdict != KG_REC_ACCEPTED || !x->timed || !isfinite(x->speedup))
				continue;
			if (x->speedup > best)
				best = x->speedup;
			kg_buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#36c\"><title>%.12s %.3fx</title></circle>\n",
				      X(r), Y(x->speedup), x->id, x->speedup);
		}
		if (best > 0)
			kg_buf_printf(&path, "%s%.1f,%.1f", path.len ? " " : "", X(r), Y(best));
	}
	if (path.len)
		kg_buf_printf(b, "<polyline points=\"%s\" fill=\"none\" stroke=\"#c33\"/>\n", kg_buf_str(&path));
	kg_buf_free(&path);
	kg_buf_printf(b, "</svg>\n<p class=\"note\">Blue: each accepted candidate's first measurement. Red: the best so "
			 "far. Dashed: the reference (1x).</p>\n");
#undef X
#undef Y
}

static void codes(kg_buf *b, const json_t *line)
{
	json_t *rs = json_object_get(line, "reasons"), *seen = json_object();
	for (size_t k = 0; k < json_array_size(rs); k++) {
		const char *c = json_string_value(json_object_get(json_array_get(rs, k), "code"));
		if (!c || json_object_get(seen, c))
			continue;
		json_object_set_new(seen, c, json_true());
		kg_buf_printf(b, "%s<code>", json_object_size(seen) > 1 ? " " : "");
		esc(b, c);
		kg_buf_printf(b, "</code>");
	}
	json_decref(seen);
}

int kg_search_write_html(const char *outdir, const struct kg_history *h, const struct kg_rec *w, const json_t *final,
			 const struct kg_backend *ref_be, kg_error *e)
{
	kg_buf b = {0};
	char path[PATH_MAX], *meta_text = NULL, *src = NULL;
	snprintf(path, sizeof(path), "%s/search.json", outdir);
	json_t *meta = !kg_read_file(path, 1 << 20, &meta_text, NULL, NULL) ? json_loads(meta_text, 0, NULL) : NULL;
	kg_buf_printf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>kgate search: ");
	esc(&b, jstr(meta, "task"));
	kg_buf_printf(&b, "</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:"
			  "collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
			  "pre{background:#f4f4f4;padding:1em;overflow:auto}.accepted{color:#070}.rejected{color:#a00}"
			  ".error{color:#a60}.note{color:#555;font-size:90%%}</style>\n</head>\n<body>\n<h1>kgate search: ");
	esc(&b, jstr(meta, "task"));
	kg_buf_printf(&b, "</h1>\n<table>\n<tr><th>backend</th><td>");
	esc(&b, jstr(meta, "backend"));
	kg_buf_printf(&b, "</td></tr>\n<tr><th>agent</th><td>");
	esc(&b, jstr(meta, "agent"));
	kg_buf_printf(&b, "</td></tr>\n<tr><th>policy</th><td>");
	esc(&b, jstr(meta, "policy"));
	/* The baseline every speedup is against: the task's trusted reference, as timed. */
	const struct kg_rec *any = w && w->timed ? w : NULL;
	for (int i = 0; i < h->n && !any; i++)
		if (h->recs[i].timed)
			any = &h->recs[i];
	kg_buf_printf(&b, "</td></tr>\n<tr><th>baseline</th><td>the task's trusted %s reference",
		      ref_be->id == KG_BACKEND_TORCH ? "PyTorch" : ref_be->needs_gpu ? "CUDA" : "C");
	if (any)
		kg_buf_printf(&b, ", median %.4f ms (timed in the same session as each candidate)",
			      json_number_value(json_object_get(
				      json_object_get(json_object_get(any->j, "timing"), "reference"), "median_ms")));
	int acc = 0, rej = 0, err = 0;
	for (int i = 0; i < h->n; i++) {
		acc += h->recs[i].verdict == KG_REC_ACCEPTED;
		rej += h->recs[i].verdict == KG_REC_REJECTED;
		err += h->recs[i].verdict == KG_REC_ERROR;
	}
	kg_buf_printf(&b, "</td></tr>\n<tr><th>candidates</th><td>%d verified: %d accepted, %d rejected, %d not verified; "
			  "%d duplicate proposals shared a result</td></tr>\n</table>\n",
		      h->n, acc, rej, err, h->duplicates);
	kg_buf_printf(&b, "<h2>Speedup per round</h2>\n");
	plot(&b, h);
	kg_buf_printf(&b, "<h2>Winner</h2>\n");
	if (!w) {
		kg_buf_printf(&b, "<p>No candidate was accepted.</p>\n");
	} else {
		kg_buf_printf(&b, "<p><code>%.12s</code>, round %d, idea %d: <span class=\"accepted\">", w->id, w->round,
			      w->idea + 1);
		esc(&b, jstr(w->j, "verdict"));
		kg_buf_printf(&b, "</span>");
		if (w->timed)
			kg_buf_printf(&b, "; first measurement %.4f ms, speedup %.3fx", w->median_ms, w->speedup);
		kg_buf_printf(&b, ".</p>\n");
		json_t *list = json_object_get(final, "finalists");
		for (size_t i = 0; i < json_array_size(list); i++) {
			json_t *x = json_array_get(list, i);
			if (strcmp(jstr(x, "id"), w->id) || !json_integer_value(json_object_get(x, "n")))
				continue;
			json_t *ci = json_object_get(x, "interval");
			kg_buf_printf(&b, "<p>Re-timed %lld times, interleaved with the other finalists: speedup %.3fx, "
					  "%.0f%% interval [%.3f, %.3f]. %s %s</p>\n",
				      (long long)json_integer_value(json_object_get(x, "n")),
				      json_number_value(json_object_get(x, "median")),
				      100 * json_number_value(json_object_get(x, "coverage")),
				      json_number_value(json_array_get(ci, 0)), json_number_value(json_array_get(ci, 1)),
				      json_is_true(json_object_get(final, "significant"))
					      ? "Faster than every other finalist beyond the measured spread."
					      : "No significant difference from the other finalists whose intervals overlap; "
						"the earliest of them is kept.",
				      json_is_true(json_object_get(final, "faster_than_reference"))
					      ? "Faster than the reference beyond the measured spread."
					      : "Not faster than the reference beyond the measured spread.");
		}
		snprintf(path, sizeof(path), "%s/%s", outdir, jstr(w->j, "file"));
		kg_buf_printf(&b, "<pre>");
		if (!kg_read_file(path, MAX_SOURCE, &src, NULL, NULL))
			esc(&b, src);
		else
			kg_buf_printf(&b, "(source not found)");
		kg_buf_printf(&b, "</pre>\n");
	}
	kg_buf_printf(&b, "<h2>Every candidate</h2>\n<table>\n<tr><th>round</th><th>idea</th><th>id</th><th>verdict</th>"
			  "<th>reason codes</th><th>speedup</th></tr>\n");
	for (int i = 0; i < h->n; i++) {
		const struct kg_rec *r = &h->recs[i];
		const char *cls = r->verdict == KG_REC_ACCEPTED ? "accepted" : r->verdict == KG_REC_REJECTED ? "rejected" : "error";
		kg_buf_printf(&b, "<tr><td>%d</td><td>", r->round);
		const char *label = jstr(r->j, "name")[0] ? jstr(r->j, "name") : jstr(r->j, "idea_text");
		esc(&b, strlen(label) > 200 ? "(long idea text)" : label);
		kg_buf_printf(&b, "</td><td><code>%.12s</code></td><td class=\"%s\">%s</td><td>", r->id, cls, cls);
		codes(&b, r->j);
		if (r->verdict == KG_REC_ERROR) {
			kg_buf_printf(&b, " ");
			esc(&b, jstr(r->j, "error"));
		}
		kg_buf_printf(&b, "</td><td>");
		if (r->timed)
			kg_buf_printf(&b, "%.3fx", r->speedup);
		kg_buf_printf(&b, "</td></tr>\n");
	}
	kg_buf_printf(&b, "</table>\n<p class=\"note\">Written by kgate search; the full reports are in candidates/, the "
			  "history in history.jsonl.</p>\n</body>\n</html>\n");
	snprintf(path, sizeof(path), "%s/report.html", outdir);
	int rc = kg_write_atomic(path, kg_buf_str(&b), b.len, e);
	kg_buf_free(&b);
	json_decref(meta);
	free(meta_text);
	free(src);
	return rc;
}
