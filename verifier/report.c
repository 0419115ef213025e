/* Report renderers: JSON (schema in docs/report.md), SARIF 2.1.0 for code scanning (sarif.c),
 * JUnit XML for CI test views (junit.c), and the terminal summary. All render the same verdict;
 * none computes anything. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kg_text.h"
#include "verifier/report_int.h"
#include "verifier/verdict.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

const char *kg_report_verdict_word(const struct kg_verdict *v)
{
	return v->exit_code == KG_EXIT_ACCEPTED ? "accepted" : v->exit_code == KG_EXIT_REJECTED ? "rejected" : "error";
}

json_t *kg_report_jstr(struct kg_rctx *rc, const char *s)
{
	int esc = 0;
	char *t = kg_text_safe_dup(s, KG_TEXT_MULTILINE, &esc);
	json_t *j = t ? json_string(t) : NULL;
	free(t);
	rc->escaped += esc;
	/* kg_text leaves only valid UTF-8: NULL here is out of memory, and a placeholder keeps the
	 * field (and the reason holding it) in the report */
	return j ? j : json_string("(out of memory)");
}

static json_t *str_list(struct kg_rctx *rc, const char *csv)
{
	json_t *a = json_array();
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", csv);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(a, kg_report_jstr(rc, t));
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
	return json_pack("{s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:i}", "n", t->n, "median_ms", json_real(t->median_ms), "p10_ms",
			 json_real(t->p10_ms), "p90_ms", json_real(t->p90_ms), "min_ms", json_real(t->min_ms), "max_ms",
			 json_real(t->max_ms), "spread", json_real(t->spread), "batch", t->batch > 1 ? t->batch : 1);
}

json_t *kg_report_reason_obj(struct kg_rctx *rc, const struct kg_reason *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "code", json_string(kg_reason_name(r->code)));
	json_object_set_new(o, "message", kg_report_jstr(rc, r->message));
	if (r->input_class[0])
		json_object_set_new(o, "input_class", kg_report_jstr(rc, r->input_class));
	if (r->has_seed) {
		char seed[32];
		snprintf(seed, sizeof(seed), "0x%016llx", (unsigned long long)r->seed);
		json_object_set_new(o, "seed", json_string(seed));
	}
	if (r->shape[0])
		json_object_set_new(o, "shape", kg_report_jstr(rc, r->shape));
	if (r->tensor[0])
		json_object_set_new(o, "tensor", kg_report_jstr(rc, r->tensor));
	if (r->index >= 0)
		json_object_set_new(o, "index", json_integer(r->index));
	if (r->index_str[0])
		json_object_set_new(o, "element", kg_report_jstr(rc, r->index_str));
	if (r->has_values) {
		json_object_set_new(o, "expected", num_or_null(r->expected));
		json_object_set_new(o, "got", num_or_null(r->got));
	}
	if (r->occurrences > 1)
		json_object_set_new(o, "occurrences", json_integer(r->occurrences));
	if (r->also_classes[0])
		json_object_set_new(o, "also_classes", str_list(rc, r->also_classes));
	return o;
}

static json_t *verdict_json(const struct kg_verdict *v)
{
	struct kg_rctx rc = {0};
	char seed[72];
	if (v->seed_key[0])
		snprintf(seed, sizeof(seed), "%s", v->seed_key);
	else
		snprintf(seed, sizeof(seed), "0x%016llx", (unsigned long long)v->master_seed);
	json_t *root = json_object();
	json_object_set_new(root, "kgate_report", json_integer(1));
	json_object_set_new(root, "kgate_version", json_string(KG_VERSION));
	json_object_set_new(root, "verdict", json_string(kg_report_verdict_word(v)));
	json_object_set_new(root, "exit_code", json_integer(v->exit_code));
	json_object_set_new(root, "task", kg_report_jstr(&rc, v->task));
	json_object_set_new(root, "candidate", kg_report_jstr(&rc, v->candidate));
	json_object_set_new(root, "backend", kg_report_jstr(&rc, v->backend));
	json_object_set_new(root, "device", kg_report_jstr(&rc, v->device));
	json_object_set_new(root, "policy", kg_report_jstr(&rc, v->policy));
	json_object_set_new(root, "shape_set", kg_report_jstr(&rc, v->shape_set));
	json_object_set_new(root, "dims", kg_report_jstr(&rc, v->dims));
	json_object_set_new(root, "seed", json_string(seed));
	json_object_set_new(root, "sandbox", json_pack("{s:o,s:o}", "layers_active", str_list(&rc, v->layers_active),
							"layers_failed", str_list(&rc, v->layers_failed)));
	json_t *reasons = json_array();
	for (int i = 0; i < v->n_reasons; i++)
		json_array_append_new(reasons, kg_report_reason_obj(&rc, &v->reasons[i]));
	json_object_set_new(root, "reasons", reasons);
	json_t *checks = json_array();
	static const char *const st[] = {"pass", "fail", "skip"};
	for (int i = 0; i < v->n_checks; i++)
		json_array_append_new(checks, json_pack("{s:o,s:s,s:o,s:o}", "name", kg_report_jstr(&rc, v->checks[i].name),
							 "status", st[v->checks[i].status], "detail",
							 kg_report_jstr(&rc, v->checks[i].detail), "seconds",
							 json_real(v->checks[i].seconds)));
	json_object_set_new(root, "checks", checks);
	json_object_set_new(root, "trials", json_integer(v->trials_run));
	json_object_set_new(root, "degenerate_classes", str_list(&rc, v->degenerate_classes));
	if (v->acc.n) /* the worst agreement over the trials, norm-wise beside element-wise (docs/report.md) */
		json_object_set_new(
			root, "accuracy",
			json_pack("{s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "comparisons", v->acc.n, "max_abs_error",
				  num_or_null(v->acc.max_abs_err), "max_rel_error", num_or_null(v->acc.max_rel_err),
				  "normwise_error", num_or_null(v->acc.normwise_err), "tolerance_used",
				  num_or_null(v->acc.tol_used), "atol", json_real(v->acc.atol), "rtol", json_real(v->acc.rtol),
				  "growth", json_real(v->acc.growth), "input_class", kg_report_jstr(&rc, v->acc.input_class),
				  "shape", kg_report_jstr(&rc, v->acc.shape), "tensor", kg_report_jstr(&rc, v->acc.tensor)));
	if (v->acc.n) /* the fewest bits any comparison kept (docs/report.md) */
		json_object_set_new(
			root, "precision",
			json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "effective_bits", json_real(v->acc.effective_bits),
				  "normwise_error", num_or_null(v->acc.normwise_res), "row_factor_max",
				  json_real(v->acc.factor_max), "input_class", kg_report_jstr(&rc, v->acc.bits_class),
				  "shape", kg_report_jstr(&rc, v->acc.bits_shape), "tensor",
				  kg_report_jstr(&rc, v->acc.bits_tensor)));
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
		json_object_set_new(t, "ceiling_gflops", json_real(v->ceiling_gflops));
		json_object_set_new(t, "roofline", json_real(v->roofline));
		json_object_set_new(root, "timing", t);
	}
	if (v->n_baselines) {
		/* what the speed was measured against: each baseline, timed or why not, and the best */
		json_t *bl = json_array();
		for (int i = 0; i < v->n_baselines; i++) {
			const struct kg_baseline *b = &v->baselines[i];
			json_array_append_new(bl, json_pack("{s:o,s:b,s:o,s:o,s:o}", "name", kg_report_jstr(&rc, b->name),
							    "timed", b->timed, "median_ms",
							    b->timed ? json_real(b->median_ms) : json_null(), "speedup",
							    b->timed ? json_real(b->speedup) : json_null(), "status",
							    kg_report_jstr(&rc, b->status)));
		}
		json_object_set_new(root, "baselines", bl);
		json_object_set_new(root, "best_baseline",
				    v->best_baseline >= 0 ? kg_report_jstr(&rc, v->baselines[v->best_baseline].name)
							  : json_null());
	}
	if (v->input_order[0])
		json_object_set_new(root, "input_order", kg_report_jstr(&rc, v->input_order));
	json_object_set_new(root, "durations",
			    json_pack("{s:o,s:b,s:o,s:o,s:o,s:o}", "compile_s", json_real(v->t_compile_s), "compile_cached",
				      v->compile_cached, "sandbox_start_s", json_real(v->t_reference_s), "checks_s",
				      json_real(v->t_checks_s), "timing_s", json_real(v->t_timing_s), "total_s",
				      json_real(v->t_total_s)));
	if (v->compile_log[0])
		json_object_set_new(root, "compile_log", kg_report_jstr(&rc, v->compile_log));
	if (v->internal_error[0])
		json_object_set_new(root, "error", kg_report_jstr(&rc, v->internal_error));
	if (rc.escaped)
		json_object_set_new(root, "notes", json_pack("[s]", KG_REPORT_ESCAPE_NOTE));
	return root;
}

char *kg_report_json_string(const struct kg_verdict *v)
{
	json_t *root = verdict_json(v);
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(root);
	return s;
}

FILE *kg_report_open(const char *path, kg_error *e)
{
	if (!strcmp(path, "-"))
		return stdout;
	FILE *f = fopen(path, "we");
	if (!f)
		kg_err(e, -errno, "%s: %s", path, strerror(errno));
	return f;
}

int kg_report_close(FILE *f, const char *path, kg_error *e)
{
	if (f == stdout || f == stderr)
		return fflush(f) ? kg_err(e, -EIO, "%s: write failed", f == stdout ? "stdout" : "stderr") : 0;
	if (fclose(f))
		return kg_err(e, -errno, "%s: %s", path, strerror(errno));
	return 0;
}

int kg_report_dump(json_t *root, const char *path, kg_error *e)
{
	if (!root)
		return kg_err(e, -ENOMEM, "%s: building the report failed", path);
	FILE *f = kg_report_open(path, e);
	if (!f) {
		json_decref(root);
		return e ? e->code : -EIO;
	}
	int rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_ENSURE_ASCII) ? -EIO : 0;
	fputc('\n', f);
	json_decref(root);
	int rc2 = kg_report_close(f, path, e);
	return rc ? kg_err(e, rc, "%s: write failed", path) : rc2;
}

int kg_report_json(const struct kg_verdict *v, const char *path, kg_error *e)
{
	return kg_report_dump(verdict_json(v), path, e);
}


/* Candidate-controlled fields on one line each, made safe; freed together at the end. */
struct tpool {
	char *s[96];
	int n;
};

static const char *ts(struct tpool *tp, const char *s)
{
	if (tp->n >= (int)KG_ARRAY_LEN(tp->s))
		return "(...)";
	char *t = kg_text_safe_dup(s, KG_TEXT_ONELINE, NULL);
	tp->s[tp->n++] = t;
	return t ? t : "(out of memory)";
}

/* Frees what was made since mark (a loop's body), so that any number of reasons fit. */
static void tp_trim(struct tpool *tp, int mark)
{
	while (tp->n > mark)
		free(tp->s[--tp->n]);
}

int kg_report_text_file(const struct kg_verdict *v, FILE *f)
{
	struct tpool tp = {.n = 0};
	static const char *const st[] = {"PASS", "FAIL", "SKIP"};
	fprintf(f, "kgate %s: task %s, candidate %s\n", KG_VERSION, ts(&tp, v->task), ts(&tp, v->candidate));
	fprintf(f, "  backend %s (%s), shape set %s: %s, policy %s\n", ts(&tp, v->backend), ts(&tp, v->device), ts(&tp, v->shape_set), ts(&tp, v->dims),
		ts(&tp, v->policy));
	fprintf(f, "verdict: %s (exit %d)\n", v->exit_code == KG_EXIT_ACCEPTED ? "ACCEPTED"
					      : v->exit_code == KG_EXIT_REJECTED ? "REJECTED"
										 : "NOT VERIFIED",
		v->exit_code);
	if (v->internal_error[0])
		fprintf(f, "  error: %s\n", ts(&tp, v->internal_error));
	for (int i = 0, mark = tp.n; i < v->n_reasons; tp_trim(&tp, mark), i++) {
		const struct kg_reason *r = &v->reasons[i];
		fprintf(f, "  x %-24s %s\n", kg_reason_name(r->code), ts(&tp, r->message));
		if (r->input_class[0])
			fprintf(f, "    %-24s class %s, seed 0x%016llx, shape %s\n", "", ts(&tp, r->input_class),
				(unsigned long long)r->seed, ts(&tp, r->shape));
		if (r->occurrences > 1)
			fprintf(f, "    %-24s %d trials in all%s%s\n", "", r->occurrences,
				r->also_classes[0] ? ", also classes " : "", ts(&tp, r->also_classes));
		if (r->index_str[0] || r->has_values) {
			fprintf(f, "    %-24s %s%s", "", ts(&tp, r->tensor), ts(&tp, r->index_str));
			if (r->has_values)
				fprintf(f, ": expected %.9g, got %.9g", r->expected, r->got);
			fputc('\n', f);
		}
	}
	fprintf(f, "checks:\n");
	for (int i = 0, mark = tp.n; i < v->n_checks; tp_trim(&tp, mark), i++)
		fprintf(f, "  %s %-16s %7.2fs  %s\n", st[v->checks[i].status], ts(&tp, v->checks[i].name),
			v->checks[i].seconds, ts(&tp, v->checks[i].detail));
	if (v->degenerate_classes[0])
		fprintf(f, "note: near-constant reference outputs (no evidence) under: %s\n", ts(&tp, v->degenerate_classes));
	if (v->acc.n)
		fprintf(f,
			"accuracy: worst max abs error %.3g, max rel error %.3g, norm-wise error %.3g; the worst element "
			"reached %.3g%% of its tolerance (atol %.3g, rtol %.3g; class %s, %s, output %s)\n",
			v->acc.max_abs_err, v->acc.max_rel_err, v->acc.normwise_err, 100 * v->acc.tol_used, v->acc.atol,
			v->acc.rtol, ts(&tp, v->acc.input_class), ts(&tp, v->acc.shape), ts(&tp, v->acc.tensor));
	if (v->acc.n) {
		char factor[96] = "";
		if (v->acc.factor_max > 0)
			snprintf(factor, sizeof(factor), " after each row's common factor (the largest %.2g from 1)",
				 v->acc.factor_max);
		fprintf(f, "precision: %.1f effective bits of fp32's 24 (norm-wise error %.3g%s; class %s, %s, output %s)\n",
			v->acc.effective_bits, v->acc.normwise_res, factor, ts(&tp, v->acc.bits_class),
			ts(&tp, v->acc.bits_shape), ts(&tp, v->acc.bits_tensor));
	}
	if (v->timed) {
		fprintf(f, "timing (median of %d, fresh inputs and cold caches each call):\n", v->cand.n);
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
	for (int i = 0; v->timed && i < v->n_baselines; i++) {
		const struct kg_baseline *b = &v->baselines[i];
		if (b->timed)
			fprintf(f, "  baseline  %-9s %.4f ms, speedup %.3fx%s\n", ts(&tp, b->name), b->median_ms, b->speedup,
				i == v->best_baseline ? " (best baseline)" : "");
		else
			fprintf(f, "  baseline  %-9s %s\n", ts(&tp, b->name), ts(&tp, b->status));
	}
	if (v->input_order[0] && !v->accepted)
		fprintf(f, "note: kg_forward gets this task's inputs in this order (the Model's parameters and buffers "
			   "in state_dict order): %s\n",
			ts(&tp, v->input_order));
	if (v->layers_active[0])
		fprintf(f, "sandbox: %s%s%s\n", ts(&tp, v->layers_active), v->layers_failed[0] ? "; not available: " : "",
			ts(&tp, v->layers_failed));
	if (v->seed_key[0])
		fprintf(f, "seed %s (reproduce with --seed %s); %.2f s in all\n", v->seed_key, v->seed_key,
			v->t_total_s);
	else
		fprintf(f, "seed 0x%016llx (reproduce with --seed 0x%016llx); %.2f s in all\n",
			(unsigned long long)v->master_seed, (unsigned long long)v->master_seed, v->t_total_s);
	if (v->compile_log[0] && kg_verdict_has_reason(v, KG_R_COMPILE_ERROR)) {
		/* the compiler's words, each line marked as quoted: it quotes the candidate, which must
		 * not be able to print a line that looks like kgate's own */
		char *log = kg_text_safe_dup(v->compile_log, KG_TEXT_MULTILINE, NULL);
		fprintf(f, "compile log:\n");
		for (char *line = log, *nl; line && *line; line = nl ? nl + 1 : NULL) {
			nl = strchr(line, '\n');
			fprintf(f, "  | %.*s\n", nl ? (int)(nl - line) : (int)strlen(line), line);
		}
		free(log);
	}
	tp_trim(&tp, 0);
	return ferror(f) ? -EIO : 0;
}

int kg_report_text(const struct kg_verdict *v, const char *path, kg_error *e)
{
	FILE *f = kg_report_open(path, e);
	if (!f)
		return e ? e->code : -EIO;
	int rc = kg_report_text_file(v, f);
	int rc2 = kg_report_close(f, path, e);
	return rc ? kg_err(e, rc, "%s: write failed", path) : rc2;
}

static const char *const report_formats[] = {"json", "sarif", "junit", "text", NULL};

int kg_report_check(const char *spec, kg_error *e)
{
	const char *colon = strchr(spec, ':');
	if (!colon || colon == spec || !colon[1])
		return kg_err(e, -EINVAL, "--report expects FORMAT:PATH (json, sarif, junit, text), got '%s'", spec);
	int known = 0;
	for (const char *const *f = report_formats; *f; f++)
		known |= strlen(*f) == (size_t)(colon - spec) && !strncmp(*f, spec, (size_t)(colon - spec));
	if (!known)
		return kg_err(e, -EINVAL, "--report %s: unknown format '%.*s' (json, sarif, junit, text)", spec,
			      (int)(colon - spec), spec);
	const char *path = colon + 1;
	if (!strcmp(path, "-"))
		return 0;
	char dir[4096];
	struct stat st;
	kg_dirname(path, dir, sizeof(dir));
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return kg_err(e, -ENOENT, "--report %s: the directory %s does not exist", spec, dir);
	if (access(dir, W_OK | X_OK))
		return kg_err(e, -EACCES, "--report %s: cannot write in %s: %s", spec, dir, strerror(errno));
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return kg_err(e, -EISDIR, "--report %s: %s is a directory", spec, path);
	if (!stat(path, &st) && access(path, W_OK))
		return kg_err(e, -EACCES, "--report %s: cannot write %s: %s", spec, path, strerror(errno));
	return 0;
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
