/* The JSON report (schema in docs/report.md) and the pieces every renderer shares (report_int.h):
 * the verdict's word, safe strings, the reason and baselines objects, opening and closing the
 * output. Like SARIF (sarif.c), JUnit (junit.c) and the summary (summary.c) it renders the verdict
 * and computes nothing. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kg_text.h"
#include "verifier/report/report_int.h"
#include "verifier/judge/verdict.h"

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
		/* what the speed was measured against: each baseline, timed or why not, and the one quoted */
		json_object_set_new(root, "baselines", kg_report_baselines(&rc, v));
		json_object_set_new(root, "best_baseline",
				    v->best_baseline >= 0 ? kg_report_jstr(&rc, v->baselines[v->best_baseline].name)
							  : json_null());
	}
	if (v->input_order[0])
		json_object_set_new(root, "input_order", kg_report_jstr(&rc, v->input_order));
	if (v->constants[0])
		json_object_set_new(root, "constants", kg_report_jstr(&rc, v->constants));
	if (v->module.present) {
		/* a module task: the Model's mode, what was drawn and what was kept, the shapes dropped */
		const struct kg_module_report *m = &v->module;
		json_t *ents = json_array(), *drops = json_array();
		for (int i = 0; i < m->n_entries; i++) {
			const struct kg_module_entry *x = &m->entries[i];
			json_array_append_new(ents, json_pack("{s:o,s:o,s:o,s:o,s:o}", "name", kg_report_jstr(&rc, x->name),
							      "how", kg_report_jstr(&rc, x->how), "kind",
							      kg_report_jstr(&rc, x->kind), "dtype",
							      kg_report_jstr(&rc, x->dtype), "shape",
							      kg_report_jstr(&rc, x->shape)));
		}
		for (int i = 0; i < m->n_dropped; i++)
			json_array_append_new(drops, json_pack("{s:o,s:o}", "shape", kg_report_jstr(&rc, m->dropped[i].shape),
							       "why", kg_report_jstr(&rc, m->dropped[i].why)));
		json_object_set_new(root, "module",
				    json_pack("{s:o,s:o,s:o,s:i,s:o}", "mode", kg_report_jstr(&rc, m->mode), "mode_from",
					      kg_report_jstr(&rc, m->mode_from), "entries", ents, "entries_not_listed",
					      m->n_more, "dropped_shapes", drops));
	}
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

json_t *kg_report_baselines(struct kg_rctx *rc, const struct kg_verdict *v)
{
	json_t *bl = json_array();
	for (int i = 0; i < v->n_baselines; i++) {
		const struct kg_baseline *b = &v->baselines[i];
		json_t *o = json_pack("{s:o,s:b,s:o,s:o,s:o,s:o}", "name", kg_report_jstr(rc, b->name), "timed", b->timed,
				      "median_ms", b->timed ? json_real(b->median_ms) : json_null(), "speedup",
				      b->timed ? json_real(b->speedup) : json_null(), "status", kg_report_jstr(rc, b->status),
				      "how", kg_report_jstr(rc, b->how));
		if (b->timed) {
			json_object_set_new(o, "p10_ms", json_real(b->p10_ms));
			json_object_set_new(o, "p90_ms", json_real(b->p90_ms));
			json_object_set_new(o, "spread", json_real(b->spread));
			json_object_set_new(o, "n", json_integer(b->n));
			json_object_set_new(o, "batch", json_integer(b->batch));
		}
		json_array_append_new(bl, o);
	}
	return bl;
}

int kg_report_json(const struct kg_verdict *v, const char *path, kg_error *e)
{
	return kg_report_dump(verdict_json(v), path, e);
}
