/* The SARIF 2.1.0 report for code scanning: one rule per reason code, one result per reason (one
 * per compiler diagnostic for compile.error, at the compiler's line and column), located at the
 * candidate by a URI relative to the repository's root (uriBaseId SRCROOT, --source-root), with
 * the compile log attached. Candidate-controlled text is made safe as in every report. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kg_text.h"
#include "verifier/report/report_int.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

#define MAX_DIAGS 50

/* RFC 3986: unreserved characters and '/' stay, every other byte is %XX. */
static void uri_encode(kg_buf *b, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
			kg_buf_append(b, p, 1);
		else
			kg_buf_printf(b, "%%%02X", *p);
	}
}

/* The root as an absolute directory ending in '/': --source-root, else the current directory. */
static void source_root(const struct kg_verdict *v, char *out, size_t outsz)
{
	char *real = realpath(v->source_root[0] ? v->source_root : ".", NULL);
	size_t n = real ? strlen(real) : 0;
	snprintf(out, outsz, "%s%s", real ? real : "/", n && real[n - 1] == '/' ? "" : "/");
	free(real);
}

/* The candidate's artifactLocation: relative to the root under SRCROOT when it lies inside it,
 * else an absolute file: URI (which code scanning cannot map, but which is not wrong). */
static json_t *artifact(const struct kg_verdict *v, const char *root)
{
	char *abs = realpath(v->candidate, NULL);
	const char *path = abs ? abs : v->candidate;
	size_t rl = strlen(root);
	kg_buf b = {0};
	json_t *loc;
	if (!strncmp(path, root, rl) && path[rl]) {
		uri_encode(&b, path + rl);
		loc = json_pack("{s:s,s:s}", "uri", kg_buf_str(&b), "uriBaseId", "SRCROOT");
	} else if (path[0] == '/') {
		kg_buf_append(&b, "file://", 7);
		uri_encode(&b, path);
		loc = json_pack("{s:s}", "uri", kg_buf_str(&b));
	} else { /* no realpath (the file went away): the path as given, relative to the root */
		uri_encode(&b, path);
		loc = json_pack("{s:s,s:s}", "uri", kg_buf_str(&b), "uriBaseId", "SRCROOT");
	}
	kg_buf_free(&b);
	free(abs);
	return loc;
}

struct diag {
	int line, col;
	const char *msg; /* into the log copy */
};

/* The compiler's errors in the log: "FILE:LINE:COL: error: MSG" (gcc, clang) and
 * "FILE(LINE): error: MSG" (nvcc's front end), FILE being the candidate's copy, kernel.c or
 * kernel.cu. log is modified (each message NUL-terminated). */
static int parse_diags(char *log, struct diag *d, int max)
{
	int n = 0;
	for (char *line = log, *nl; line && *line && n < max; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *k = strstr(line, "kernel.c");
		if (!k)
			continue;
		char *p = k + 8 + (k[8] == 'u');
		int ln = 0, col = 0, used = 0;
		if (sscanf(p, ":%d:%d: %n", &ln, &col, &used) == 2 && used) {
			p += used;
		} else if (sscanf(p, "(%d): %n", &ln, &used) == 1 && used) {
			p += used;
			col = 0;
		} else {
			continue;
		}
		if (strncmp(p, "error: ", 7) && strncmp(p, "fatal error: ", 13))
			continue;
		d[n].line = ln > 0 ? ln : 1;
		d[n].col = col;
		d[n].msg = p;
		n++;
	}
	return n;
}

static json_t *result(struct kg_rctx *rc, const struct kg_reason *r, const char *text, json_t *loc, int line,
		      int col)
{
	json_t *region = json_pack("{s:i}", "startLine", line);
	if (col > 0)
		json_object_set_new(region, "startColumn", json_integer(col));
	json_t *res = json_pack("{s:s,s:s,s:{s:o},s:[{s:{s:o,s:o}}]}", "ruleId", kg_reason_name(r->code), "level",
				"error", "message", "text", kg_report_jstr(rc, text), "locations", "physicalLocation",
				"artifactLocation", loc, "region", region);
	json_object_set_new(res, "properties", kg_report_reason_obj(rc, r));
	return res;
}

static void reason_text(const struct kg_reason *r, char *text, size_t sz)
{
	int n = snprintf(text, sz, "%s", r->message);
	if (r->input_class[0] && n < (int)sz)
		n += snprintf(text + n, sz - (size_t)n, " [class %s, seed 0x%016llx, shape %s]", r->input_class,
			      (unsigned long long)r->seed, r->shape);
	if (r->index_str[0] && n < (int)sz)
		n += snprintf(text + n, sz - (size_t)n, " at %s%s", r->tensor, r->index_str);
	if (r->has_values && n < (int)sz)
		snprintf(text + n, sz - (size_t)n, ": expected %.9g, got %.9g", r->expected, r->got);
}

int kg_report_sarif(const struct kg_verdict *v, const char *path, kg_error *e)
{
	struct kg_rctx rc = {0};
	char root[PATH_MAX + 2], text[1400];
	source_root(v, root, sizeof(root));
	json_t *rules = json_array(), *results = json_array();
	char *log = strdup(v->compile_log);
	struct diag diags[MAX_DIAGS];
	int n_diags = log ? parse_diags(log, diags, MAX_DIAGS) : 0;
	for (int i = 0; i < v->n_reasons; i++) {
		const struct kg_reason *r = &v->reasons[i];
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= v->reasons[j].code == r->code;
		if (!seen)
			json_array_append_new(rules, json_pack("{s:s,s:{s:s},s:{s:s},s:{s:s}}", "id", kg_reason_name(r->code),
							       "shortDescription", "text", kg_reason_short(r->code),
							       "fullDescription", "text", kg_reason_full(r->code), "help",
							       "text", kg_reason_full(r->code)));
		if (r->code == KG_R_COMPILE_ERROR && n_diags) {
			/* where the compiler says, each diagnostic its own result */
			for (int d = 0; d < n_diags; d++) {
				snprintf(text, sizeof(text), "%s", diags[d].msg);
				json_t *res = result(&rc, r, text, artifact(v, root), diags[d].line, diags[d].col);
				json_object_set_new(json_object_get(res, "properties"), "compile_log",
						    kg_report_jstr(&rc, v->compile_log));
				json_array_append_new(results, res);
			}
			continue;
		}
		reason_text(r, text, sizeof(text));
		json_t *res = result(&rc, r, text, artifact(v, root), 1, 0);
		if (r->code == KG_R_COMPILE_ERROR && v->compile_log[0])
			json_object_set_new(json_object_get(res, "properties"), "compile_log",
					    kg_report_jstr(&rc, v->compile_log));
		json_array_append_new(results, res);
	}
	free(log);
	if (v->internal_error[0]) {
		json_array_append_new(rules, json_pack("{s:s,s:{s:s}}", "id", "kgate.internal", "shortDescription", "text",
						       "kgate could not complete the verification."));
		json_array_append_new(results, json_pack("{s:s,s:s,s:{s:o},s:[{s:{s:o}}]}", "ruleId", "kgate.internal",
							 "level", "error", "message", "text",
							 kg_report_jstr(&rc, v->internal_error), "locations",
							 "physicalLocation", "artifactLocation", artifact(v, root)));
	}
	kg_buf rb = {0};
	kg_buf_append(&rb, "file://", 7);
	uri_encode(&rb, root);
	json_t *invocation = json_pack("{s:b,s:i}", "executionSuccessful", v->exit_code != KG_EXIT_INTERNAL, "exitCode",
				       v->exit_code);
	if (v->compile_log[0]) /* the compiler's whole output, also where no result points at it */
		json_object_set_new(invocation, "toolExecutionNotifications",
				    json_pack("[{s:s,s:{s:o},s:{s:s}}]", "level", "note", "message", "text",
					      kg_report_jstr(&rc, v->compile_log), "descriptor", "id", "compile-log"));
	json_t *props = json_pack("{s:o,s:s,s:o}", "task", kg_report_jstr(&rc, v->task), "verdict",
				  kg_report_verdict_word(v), "backend", kg_report_jstr(&rc, v->backend));
	if (v->compile_log[0])
		json_object_set_new(props, "compile_log", kg_report_jstr(&rc, v->compile_log));
	/* what the speed was measured against (the JSON report's block), for a code-scanning reader */
	if (v->n_baselines) {
		json_object_set_new(props, "baselines", kg_report_baselines(&rc, v));
		if (v->best_baseline >= 0)
			json_object_set_new(props, "best_baseline", kg_report_jstr(&rc, v->baselines[v->best_baseline].name));
	}
	if (rc.escaped)
		json_object_set_new(props, "notes", json_pack("[s]", KG_REPORT_ESCAPE_NOTE));
	json_t *root_obj =
		json_pack("{s:s,s:s,s:[{s:{s:{s:s,s:s,s:s,s:o}},s:{s:{s:s}},s:o,s:[o],s:o}]}", "$schema",
			  "https://json.schemastore.org/sarif-2.1.0.json", "version", "2.1.0", "runs", "tool", "driver",
			  "name", "kgate", "version", KG_VERSION, "informationUri", "https://github.com/kgate/kgate", "rules",
			  rules, "originalUriBaseIds", "SRCROOT", "uri", kg_buf_str(&rb), "results", results,
			  "invocations", invocation, "properties", props);
	kg_buf_free(&rb);
	if (!root_obj)
		return kg_err(e, -ENOMEM, "building SARIF failed");
	return kg_report_dump(root_obj, path, e);
}
