/* Report renderers: JSON (schema in docs/report.md), SARIF 2.1.0 for code scanning, JUnit XML for
 * CI test views, and the terminal summary. All render the same verdict; none computes anything. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/verdict.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

static const char *verdict_word(const struct kg_verdict *v)
{
	return v->exit_code == KG_EXIT_ACCEPTED ? "accepted" : v->exit_code == KG_EXIT_REJECTED ? "rejected" : "error";
}

static json_t *str_list(const char *csv)
{
	json_t *a = json_array();
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", csv);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(a, json_string(t));
	return a;
}

static json_t *num_or_null(double x)
{
	/* JSON has no NaN or Inf: those become strings so the value is not lost. */
	if (x != x)
		return json_string("nan");
	if (x > 1.7976931348623157e308)
		return json_string("inf");
	if (x < -1.7976931348623157e308)
		return json_string("-inf");
	return json_real(x);
}

static json_t *timing_obj(const struct kg_timing *t)
{
	return json_pack("{s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "n", t->n, "median_ms", json_real(t->median_ms), "p10_ms",
			 json_real(t->p10_ms), "p90_ms", json_real(t->p90_ms), "min_ms", json_real(t->min_ms), "max_ms",
			 json_real(t->max_ms), "spread", json_real(t->spread));
}

static json_t *reason_obj(const struct kg_reason *r)
{
	json_t *o = json_pack("{s:s,s:s}", "code", kg_reason_name(r->code), "message", r->message);
	if (r->input_class[0])
		json_object_set_new(o, "input_class", json_string(r->input_class));
	if (r->has_seed) {
		char seed[32];
		snprintf(seed, sizeof(seed), "0x%016llx", (unsigned long long)r->seed);
		json_object_set_new(o, "seed", json_string(seed));
	}
	if (r->shape[0])
		json_object_set_new(o, "shape", json_string(r->shape));
	if (r->tensor[0])
		json_object_set_new(o, "tensor", json_string(r->tensor));
	if (r->index >= 0)
		json_object_set_new(o, "index", json_integer(r->index));
	if (r->index_str[0])
		json_object_set_new(o, "element", json_string(r->index_str));
	if (r->has_values) {
		json_object_set_new(o, "expected", num_or_null(r->expected));
		json_object_set_new(o, "got", num_or_null(r->got));
	}
	if (r->occurrences > 1)
		json_object_set_new(o, "occurrences", json_integer(r->occurrences));
	if (r->also_classes[0])
		json_object_set_new(o, "also_classes", str_list(r->also_classes));
	return o;
}

static json_t *verdict_json(const struct kg_verdict *v)
{
	char seed[72];
	if (v->seed_key[0])
		snprintf(seed, sizeof(seed), "%s", v->seed_key);
	else
		snprintf(seed, sizeof(seed), "0x%016llx", (unsigned long long)v->master_seed);
	json_t *root = json_object();
	json_object_set_new(root, "kgate_report", json_integer(1));
	json_object_set_new(root, "kgate_version", json_string(KG_VERSION));
	json_object_set_new(root, "verdict", json_string(verdict_word(v)));
	json_object_set_new(root, "exit_code", json_integer(v->exit_code));
	json_object_set_new(root, "task", json_string(v->task));
	json_object_set_new(root, "candidate", json_string(v->candidate));
	json_object_set_new(root, "backend", json_string(v->backend));
	json_object_set_new(root, "device", json_string(v->device));
	json_object_set_new(root, "policy", json_string(v->policy));
	json_object_set_new(root, "shape_set", json_string(v->shape_set));
	json_object_set_new(root, "dims", json_string(v->dims));
	json_object_set_new(root, "seed", json_string(seed));
	json_object_set_new(root, "sandbox", json_pack("{s:o,s:o}", "layers_active", str_list(v->layers_active),
							"layers_failed", str_list(v->layers_failed)));
	json_t *reasons = json_array();
	for (int i = 0; i < v->n_reasons; i++)
		json_array_append_new(reasons, reason_obj(&v->reasons[i]));
	json_object_set_new(root, "reasons", reasons);
	json_t *checks = json_array();
	static const char *const st[] = {"pass", "fail", "skip"};
	for (int i = 0; i < v->n_checks; i++)
		json_array_append_new(checks, json_pack("{s:s,s:s,s:s,s:o}", "name", v->checks[i].name, "status",
							 st[v->checks[i].status], "detail", v->checks[i].detail, "seconds",
							 json_real(v->checks[i].seconds)));
	json_object_set_new(root, "checks", checks);
	json_object_set_new(root, "trials", json_integer(v->trials_run));
	json_object_set_new(root, "degenerate_classes", str_list(v->degenerate_classes));
	if (v->acc.n) /* the worst agreement over the trials, norm-wise beside element-wise (docs/report.md) */
		json_object_set_new(
			root, "accuracy",
			json_pack("{s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:s,s:s}", "comparisons", v->acc.n, "max_abs_error",
				  num_or_null(v->acc.max_abs_err), "max_rel_error", num_or_null(v->acc.max_rel_err),
				  "normwise_error", num_or_null(v->acc.normwise_err), "tolerance_used",
				  num_or_null(v->acc.tol_used), "atol", json_real(v->acc.atol), "rtol", json_real(v->acc.rtol),
				  "growth", json_real(v->acc.growth), "input_class", v->acc.input_class, "shape",
				  v->acc.shape, "tensor", v->acc.tensor));
	if (v->timed) {
		json_t *t = json_object();
		json_object_set_new(t, "candidate", timing_obj(&v->cand));
		json_object_set_new(t, "reference", timing_obj(&v->ref));
		json_object_set_new(t, "parent_median_ms", json_real(v->cand.parent_median_ms));
		json_object_set_new(t, "speedup", json_real(v->speedup));
		json_object_set_new(t, "bytes", json_real(v->bytes));
		json_object_set_new(t, "flops", json_real(v->flops));
		json_object_set_new(t, "gbps", json_real(v->cand_gbps));
		json_object_set_new(t, "gflops", json_real(v->cand_gflops));
		json_object_set_new(t, "ceiling_gbps", json_real(v->ceiling_gbps));
		json_object_set_new(t, "roofline", json_real(v->roofline));
		json_object_set_new(root, "timing", t);
	}
	json_object_set_new(root, "durations",
			    json_pack("{s:o,s:o,s:o,s:o,s:o}", "compile_s", json_real(v->t_compile_s), "sandbox_start_s",
				      json_real(v->t_reference_s), "checks_s", json_real(v->t_checks_s), "timing_s",
				      json_real(v->t_timing_s), "total_s", json_real(v->t_total_s)));
	if (v->compile_log[0])
		json_object_set_new(root, "compile_log", json_string(v->compile_log));
	if (v->internal_error[0])
		json_object_set_new(root, "error", json_string(v->internal_error));
	return root;
}

char *kg_report_json_string(const struct kg_verdict *v)
{
	json_t *root = verdict_json(v);
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(root);
	return s;
}

static FILE *open_out(const char *path, kg_error *e)
{
	if (!strcmp(path, "-"))
		return stdout;
	FILE *f = fopen(path, "we");
	if (!f)
		kg_err(e, -errno, "%s: %s", path, strerror(errno));
	return f;
}

static int close_out(FILE *f, const char *path, kg_error *e)
{
	if (f == stdout)
		return fflush(f) ? kg_err(e, -EIO, "stdout: write failed") : 0;
	if (fclose(f))
		return kg_err(e, -errno, "%s: %s", path, strerror(errno));
	return 0;
}

static int dump_json(json_t *root, const char *path, kg_error *e)
{
	FILE *f = open_out(path, e);
	if (!f) {
		json_decref(root);
		return e ? e->code : -EIO;
	}
	int rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_ENSURE_ASCII) ? -EIO : 0;
	fputc('\n', f);
	json_decref(root);
	int rc2 = close_out(f, path, e);
	return rc ? kg_err(e, rc, "%s: write failed", path) : rc2;
}

int kg_report_json(const struct kg_verdict *v, const char *path, kg_error *e)
{
	return dump_json(verdict_json(v), path, e);
}

int kg_report_sarif(const struct kg_verdict *v, const char *path, kg_error *e)
{
	json_t *rules = json_array(), *results = json_array();
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
		char text[1200];
		int n = snprintf(text, sizeof(text), "%s", r->message);
		if (r->input_class[0] && n < (int)sizeof(text))
			n += snprintf(text + n, sizeof(text) - (size_t)n, " [class %s, seed 0x%016llx, shape %s]",
				      r->input_class, (unsigned long long)r->seed, r->shape);
		if (r->index_str[0] && n < (int)sizeof(text))
			n += snprintf(text + n, sizeof(text) - (size_t)n, " at %s%s", r->tensor, r->index_str);
		if (r->has_values && n < (int)sizeof(text))
			snprintf(text + n, sizeof(text) - (size_t)n, ": expected %.9g, got %.9g", r->expected, r->got);
		json_t *res = json_pack("{s:s,s:s,s:{s:s},s:[{s:{s:{s:s},s:{s:i}}}]}", "ruleId", kg_reason_name(r->code),
					"level", "error",
					"message", "text", text, "locations", "physicalLocation", "artifactLocation", "uri",
					v->candidate, "region", "startLine", 1);
		json_t *props = reason_obj(r);
		json_object_set_new(res, "properties", props);
		json_array_append_new(results, res);
	}
	if (v->internal_error[0]) {
		json_array_append_new(rules, json_pack("{s:s,s:{s:s}}", "id", "kgate.internal", "shortDescription", "text",
						       "kgate could not complete the verification."));
		json_array_append_new(results,
				      json_pack("{s:s,s:s,s:{s:s},s:[{s:{s:{s:s}}}]}", "ruleId", "kgate.internal", "level",
						"error", "message", "text", v->internal_error, "locations",
						"physicalLocation", "artifactLocation", "uri", v->candidate));
	}
	json_t *root = json_pack(
		"{s:s,s:s,s:[{s:{s:{s:s,s:s,s:s,s:o}},s:o,s:[{s:b,s:i}],s:{s:s,s:s,s:s}}]}", "$schema",
		"https://json.schemastore.org/sarif-2.1.0.json", "version", "2.1.0", "runs", "tool", "driver", "name", "kgate",
		"version", KG_VERSION, "informationUri", "https://github.com/kgate/kgate", "rules", rules, "results", results,
		"invocations", "executionSuccessful", v->exit_code != KG_EXIT_INTERNAL, "exitCode", v->exit_code,
		"properties", "task", v->task, "verdict", verdict_word(v), "backend", v->backend);
	if (!root) {
		return kg_err(e, -ENOMEM, "building SARIF failed");
	}
	return dump_json(root, path, e);
}

static void xml_escape(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		switch (ch) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		default:
			/* XML 1.0 forbids most control characters even escaped. */
			if (ch < 0x20 && ch != '\n' && ch != '\t' && ch != '\r')
				fputc('?', f);
			else
				fputc(ch, f);
		}
	}
}

int kg_report_junit(const struct kg_verdict *v, const char *path, kg_error *e)
{
	FILE *f = open_out(path, e);
	if (!f)
		return e ? e->code : -EIO;
	int failures = 0, skipped = 0, orphans = 0;
	for (int i = 0; i < v->n_checks; i++) {
		failures += v->checks[i].status == KG_CHECK_FAIL;
		skipped += v->checks[i].status == KG_CHECK_SKIP;
	}
	for (int i = 0; i < v->n_reasons; i++) {
		int found = 0;
		for (int j = 0; j < v->n_checks; j++)
			found |= !strcmp(v->checks[j].name, kg_reason_check(v->reasons[i].code));
		orphans += !found;
	}
	int extra = orphans > 0 || v->internal_error[0];
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"kgate.");
	xml_escape(f, v->task);
	fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n", v->n_checks + extra,
		failures + (orphans > 0), v->internal_error[0] ? 1 : 0, skipped, v->t_total_s);
	for (int i = 0; i < v->n_checks; i++) {
		const struct kg_check *c = &v->checks[i];
		fprintf(f, "    <testcase classname=\"kgate.");
		xml_escape(f, v->task);
		fprintf(f, "\" name=\"");
		xml_escape(f, c->name);
		fprintf(f, "\" time=\"%.3f\">\n", c->seconds);
		if (c->status == KG_CHECK_SKIP) {
			fprintf(f, "      <skipped message=\"");
			xml_escape(f, c->detail);
			fprintf(f, "\"/>\n");
		} else if (c->status == KG_CHECK_FAIL) {
			fprintf(f, "      <failure message=\"");
			xml_escape(f, c->detail);
			fprintf(f, "\">");
			for (int r = 0; r < v->n_reasons; r++) {
				if (strcmp(kg_reason_check(v->reasons[r].code), c->name))
					continue;
				xml_escape(f, kg_reason_name(v->reasons[r].code));
				fputs(": ", f);
				xml_escape(f, v->reasons[r].message);
				fputc('\n', f);
			}
			fprintf(f, "</failure>\n");
		} else {
			fprintf(f, "      <system-out>");
			xml_escape(f, c->detail);
			fprintf(f, "</system-out>\n");
		}
		fprintf(f, "    </testcase>\n");
	}
	if (extra) {
		fprintf(f, "    <testcase classname=\"kgate.");
		xml_escape(f, v->task);
		fprintf(f, "\" name=\"verdict\" time=\"0\">\n");
		if (v->internal_error[0]) {
			fprintf(f, "      <error message=\"");
			xml_escape(f, v->internal_error);
			fprintf(f, "\"/>\n");
		}
		if (orphans) {
			fprintf(f, "      <failure message=\"rejected\">");
			for (int r = 0; r < v->n_reasons; r++) {
				int found = 0;
				for (int j = 0; j < v->n_checks; j++)
					found |= !strcmp(v->checks[j].name, kg_reason_check(v->reasons[r].code));
				if (found)
					continue;
				xml_escape(f, kg_reason_name(v->reasons[r].code));
				fputs(": ", f);
				xml_escape(f, v->reasons[r].message);
				fputc('\n', f);
			}
			fprintf(f, "</failure>\n");
		}
		fprintf(f, "    </testcase>\n");
	}
	fprintf(f, "  </testsuite>\n</testsuites>\n");
	return close_out(f, path, e);
}

int kg_report_text(const struct kg_verdict *v, const char *path, kg_error *e)
{
	FILE *f = open_out(path, e);
	if (!f)
		return e ? e->code : -EIO;
	static const char *const st[] = {"PASS", "FAIL", "SKIP"};
	fprintf(f, "kgate %s: task %s, candidate %s\n", KG_VERSION, v->task, v->candidate);
	fprintf(f, "  backend %s (%s), shape set %s: %s, policy %s\n", v->backend, v->device, v->shape_set, v->dims,
		v->policy);
	fprintf(f, "verdict: %s (exit %d)\n", v->exit_code == KG_EXIT_ACCEPTED ? "ACCEPTED"
					      : v->exit_code == KG_EXIT_REJECTED ? "REJECTED"
										 : "NOT VERIFIED",
		v->exit_code);
	if (v->internal_error[0])
		fprintf(f, "  error: %s\n", v->internal_error);
	for (int i = 0; i < v->n_reasons; i++) {
		const struct kg_reason *r = &v->reasons[i];
		fprintf(f, "  x %-24s %s\n", kg_reason_name(r->code), r->message);
		if (r->input_class[0])
			fprintf(f, "    %-24s class %s, seed 0x%016llx, shape %s\n", "", r->input_class,
				(unsigned long long)r->seed, r->shape);
		if (r->occurrences > 1)
			fprintf(f, "    %-24s %d trials in all%s%s\n", "", r->occurrences,
				r->also_classes[0] ? ", also classes " : "", r->also_classes);
		if (r->index_str[0] || r->has_values) {
			fprintf(f, "    %-24s %s%s", "", r->tensor, r->index_str);
			if (r->has_values)
				fprintf(f, ": expected %.9g, got %.9g", r->expected, r->got);
			fputc('\n', f);
		}
	}
	fprintf(f, "checks:\n");
	for (int i = 0; i < v->n_checks; i++)
		fprintf(f, "  %s %-16s %7.2fs  %s\n", st[v->checks[i].status], v->checks[i].name, v->checks[i].seconds,
			v->checks[i].detail);
	if (v->degenerate_classes[0])
		fprintf(f, "note: near-constant reference outputs (no evidence) under: %s\n", v->degenerate_classes);
	if (v->acc.n)
		fprintf(f,
			"accuracy: worst max abs error %.3g, max rel error %.3g, norm-wise error %.3g; the worst element "
			"reached %.3g%% of its tolerance (atol %.3g, rtol %.3g; class %s, %s, output %s)\n",
			v->acc.max_abs_err, v->acc.max_rel_err, v->acc.normwise_err, 100 * v->acc.tol_used, v->acc.atol,
			v->acc.rtol, v->acc.input_class, v->acc.shape, v->acc.tensor);
	if (v->timed) {
		fprintf(f, "timing (median of %d, fresh inputs and flushed caches each call):\n", v->cand.n);
		fprintf(f, "  candidate %10.4f ms  [p10 %.4f, p90 %.4f, spread %.1f%%]\n", v->cand.median_ms,
			v->cand.p10_ms, v->cand.p90_ms, 100 * v->cand.spread);
		fprintf(f, "  reference %10.4f ms  [p10 %.4f, p90 %.4f, spread %.1f%%]\n", v->ref.median_ms, v->ref.p10_ms,
			v->ref.p90_ms, 100 * v->ref.spread);
		fprintf(f, "  speedup   %10.3fx", v->speedup);
		if (v->bytes > 0)
			fprintf(f, "   %.1f GB/s", v->cand_gbps);
		if (v->roofline > 0)
			fprintf(f, " = %.1f%% of the measured %.1f GB/s ceiling", 100 * v->roofline, v->ceiling_gbps);
		if (v->flops > 0)
			fprintf(f, ", %.2f GFLOP/s", v->cand_gflops);
		fputc('\n', f);
	}
	if (v->layers_active[0])
		fprintf(f, "sandbox: %s%s%s\n", v->layers_active, v->layers_failed[0] ? "; not available: " : "",
			v->layers_failed);
	if (v->seed_key[0])
		fprintf(f, "seed %s (reproduce with --seed %s); %.2f s in all\n", v->seed_key, v->seed_key,
			v->t_total_s);
	else
		fprintf(f, "seed 0x%016llx (reproduce with --seed 0x%016llx); %.2f s in all\n",
			(unsigned long long)v->master_seed, (unsigned long long)v->master_seed, v->t_total_s);
	if (v->compile_log[0] && kg_verdict_has_reason(v, KG_R_COMPILE_ERROR))
		fprintf(f, "compile log:\n%s\n", v->compile_log);
	return close_out(f, path, e);
}

int kg_report_write(const struct kg_verdict *v, const char *spec, kg_error *e)
{
	const char *colon = strchr(spec, ':');
	char fmt[16];
	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(fmt) || !colon[1])
		return kg_err(e, -EINVAL, "--report expects FORMAT:PATH (json, sarif, junit, text), got '%s'", spec);
	snprintf(fmt, sizeof(fmt), "%.*s", (int)(colon - spec), spec);
	const char *path = colon + 1;
	if (!strcmp(fmt, "json"))
		return kg_report_json(v, path, e);
	if (!strcmp(fmt, "sarif"))
		return kg_report_sarif(v, path, e);
	if (!strcmp(fmt, "junit"))
		return kg_report_junit(v, path, e);
	if (!strcmp(fmt, "text"))
		return kg_report_text(v, path, e);
	return kg_err(e, -EINVAL, "unknown report format '%s' (json, sarif, junit, text)", fmt);
}
