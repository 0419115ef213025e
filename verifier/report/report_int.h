/* Pieces shared by the report renderers (json.c: JSON; summary.c: the text summary; junit.c:
 * JUnit; sarif.c: SARIF). Every string that a candidate can influence goes through kg_text
 * (common/kg_text.h) on its way out; rc counts the bytes that had to be escaped, for the note the
 * reports carry. */
#ifndef KG_REPORT_INT_H
#define KG_REPORT_INT_H

#include <jansson.h>
#include <stdio.h>

#include "verifier/report/report.h"

struct kg_rctx {
	int escaped; /* bytes written as \xNN (invalid UTF-8, control characters) or \uNNNN (invisible) */
};

#define KG_REPORT_ESCAPE_NOTE                                                                                    \
	"candidate-controlled text held invalid UTF-8, control or invisible characters; each such byte is shown "  \
	"as \\xNN, each invisible character (bidirectional override, zero-width or other format character) as "  \
	"\\uNNNN"

const char *kg_report_verdict_word(const struct kg_verdict *v);
/* A JSON string of s, made safe (never NULL, never refused by the encoder). */
json_t *kg_report_jstr(struct kg_rctx *rc, const char *s);
/* The reason as the JSON report has it (docs/report.md). */
json_t *kg_report_reason_obj(struct kg_rctx *rc, const struct kg_reason *r);
/* The verdict's baselines block: each row (reference, eager, compile), timed or why not, and how. */
json_t *kg_report_baselines(struct kg_rctx *rc, const struct kg_verdict *v);
FILE *kg_report_open(const char *path, kg_error *e);
int kg_report_close(FILE *f, const char *path, kg_error *e);
int kg_report_dump(json_t *root, const char *path, kg_error *e);

#endif
