/* The reports of a verdict: JSON (json.c, schema in docs/report.md), SARIF 2.1.0 (sarif.c), JUnit
 * XML (junit.c) and the terminal summary (summary.c), each rendered from the verdict alone, and the
 * --report spec checked and dispatched to them (report.c). */
#ifndef KG_REPORT_H
#define KG_REPORT_H

#include <stdio.h>

#include "kg_common.h"
#include "verifier/judge/verdict.h"

/* Each returns 0 or a negative errno. json.c: */
int kg_report_json(const struct kg_verdict *v, const char *path, kg_error *e);
/* sarif.c, junit.c, summary.c: */
int kg_report_sarif(const struct kg_verdict *v, const char *path, kg_error *e);
int kg_report_junit(const struct kg_verdict *v, const char *path, kg_error *e);
int kg_report_text(const struct kg_verdict *v, const char *path, kg_error *e);
/* The terminal summary onto an open stream (stderr when stdout carries a report). */
int kg_report_text_file(const struct kg_verdict *v, FILE *f);
/* report.c: "json:out.json" etc.; path "-" is stdout. */
int kg_report_write(const struct kg_verdict *v, const char *spec, kg_error *e);
/* Before any work: the format is known and the path can be written (its directory exists and is
 * writable, it is not a directory). -EINVAL etc. with e saying which. */
int kg_report_check(const char *spec, kg_error *e);
/* json.c: the JSON document as a string (caller frees), for the agents' feedback. */
char *kg_report_json_string(const struct kg_verdict *v);

#endif
