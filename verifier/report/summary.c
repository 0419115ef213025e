/* The terminal summary (`kgate verify` without -q, and `--report text:PATH`): the verdict, its
 * reasons, the checks and the measurements, for a person to read. Every string a candidate can
 * influence goes through kg_text on one line; the full record is the JSON report (json.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_text.h"
#include "verifier/report/report_int.h"
#include "verifier/judge/verdict.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

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

/* The first of a kind, as the JSON report has it: message, trial, counts, element. */
static void reason_in_full(FILE *f, struct tpool *tp, const struct kg_reason *r)
{
	fprintf(f, "  x %-24s %s\n", kg_reason_name(r->code), ts(tp, r->message));
	if (r->input_class[0])
		fprintf(f, "    %-24s class %s, seed 0x%016llx, shape %s\n", "", ts(tp, r->input_class),
			(unsigned long long)r->seed, ts(tp, r->shape));
	if (r->occurrences > 1)
		fprintf(f, "    %-24s %d trials in all%s%s\n", "", r->occurrences,
			r->also_classes[0] ? ", also classes " : "", ts(tp, r->also_classes));
	if (r->index_str[0] || r->has_values) {
		fprintf(f, "    %-24s %s%s", "", ts(tp, r->tensor), ts(tp, r->index_str));
		if (r->has_values)
			fprintf(f, ": expected %.9g, got %.9g", r->expected, r->got);
		fputc('\n', f);
	}
}

/* Repeats: a trial's finding of one code, found by one check in one phase, again at other shapes
 * or under other classes (trial.c keeps one reason per code and shape). The summary shows the
 * first in full and the rest on one line, so that a rejection fits a screen; the JSON report keeps
 * every one. A reason about no shape (each forbidden symbol, a forged clock) is a finding of its
 * own and always shown. */
static int same_kind(const struct kg_reason *a, const struct kg_reason *b)
{
	return a->shape[0] && b->shape[0] && a->code == b->code && a->found == b->found && !strcmp(a->where, b->where);
}

/* Whether list (items split by sep) holds the item of n bytes at item. */
static int listed(const char *list, char sep, const char *item, size_t n)
{
	for (const char *p = list; *p; p++) {
		const char *e = strchr(p, sep);
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !memcmp(p, item, n))
			return 1;
		if (!e)
			break;
		p = e;
	}
	return 0;
}

/* Appends to b, cut at its end (the line is bounded by the budgets below, not by this). */
static void cat(char *b, size_t cap, const char *s, size_t n)
{
	size_t len = strlen(b);
	if (n > cap - 1 - len)
		n = cap - 1 - len;
	memcpy(b + len, s, n);
	b[len + n] = '\0';
}

/* A shape as it differs within its group: the dims that every shape of the group shares are left
 * out ("H=37 W=31" where N, C, K, R and S never change), the first instance naming them all. */
static void shape_part(const struct kg_verdict *v, int first, const char *shape, char *out, size_t cap)
{
	out[0] = '\0';
	for (const char *t = shape; *t;) {
		size_t n = strcspn(t, " ");
		int common = n > 0;
		for (int j = first; common && j < v->n_reasons; j++)
			if (same_kind(&v->reasons[j], &v->reasons[first]))
				common = listed(v->reasons[j].shape, ' ', t, n);
		if (!common && n) {
			if (out[0])
				cat(out, cap, " ", 1);
			cat(out, cap, t, n);
		}
		t += n + (t[n] == ' ');
	}
	if (!out[0])
		snprintf(out, cap, "%s", shape);
}

/* Appends to b as printf would, cut at its end. */
static void catf(char *b, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void catf(char *b, size_t cap, const char *fmt, ...)
{
	size_t len = strlen(b);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b + len, cap - len, fmt, ap);
	va_end(ap);
}

#define SHAPES_BUDGET 110 /* characters of shapes named before "+N more" */
#define CLASSES_BUDGET 70

/* One line for the rest of the first's kind: how many reasons and trials, at which shapes, under
 * which classes, named compactly up to a budget each. */
static void repeats_line(FILE *f, struct tpool *tp, const struct kg_verdict *v, int first)
{
	const struct kg_reason *r0 = &v->reasons[first];
	char shapes[SHAPES_BUDGET + 160] = "", classes[512] = "", part[sizeof(r0->shape)];
	int more = 0, trials = 0, n_shapes = 0, shapes_left = 0, n_classes = 0;
	if (!r0->shape[0])
		return;
	for (int j = first + 1; j < v->n_reasons; j++) {
		const struct kg_reason *r = &v->reasons[j];
		if (!same_kind(r, r0))
			continue;
		more++;
		trials += r->occurrences > 1 ? r->occurrences : 1;
		int seen = !strcmp(r->shape, r0->shape);
		for (int k = first + 1; !seen && k < j; k++)
			seen = same_kind(&v->reasons[k], r0) && !strcmp(v->reasons[k].shape, r->shape);
		if (!seen) {
			n_shapes++;
			shape_part(v, first, r->shape, part, sizeof(part));
			if (!shapes[0] || strlen(shapes) + 2 + strlen(part) <= SHAPES_BUDGET) { /* one at least */
				if (shapes[0])
					cat(shapes, sizeof(shapes), "; ", 2);
				cat(shapes, sizeof(shapes), part, strlen(part));
			} else {
				shapes_left++;
			}
		}
		/* the classes of the rest: each one's own and its also-classes */
		char own[sizeof(r->input_class) + sizeof(r->also_classes) + 2];
		snprintf(own, sizeof(own), "%s%s%s", r->input_class, r->input_class[0] && r->also_classes[0] ? "," : "",
			 r->also_classes);
		for (const char *t = own; *t;) {
			size_t n = strcspn(t, ",");
			if (n && !listed(classes, ',', t, n) && strlen(classes) + n + 2 < sizeof(classes)) {
				if (classes[0])
					cat(classes, sizeof(classes), ",", 1);
				cat(classes, sizeof(classes), t, n);
				n_classes++;
			}
			t += n + (t[n] == ',');
		}
	}
	if (!more)
		return;
	char line[SHAPES_BUDGET + CLASSES_BUDGET + 400] = "";
	catf(line, sizeof(line), "and %d more like it", more);
	if (trials > more) /* a reason stands for every trial at its shape */
		catf(line, sizeof(line), " (%d trials)", trials);
	if (n_shapes)
		catf(line, sizeof(line), " at %d more shape%s (%s", n_shapes, n_shapes == 1 ? "" : "s", shapes);
	if (n_shapes && shapes_left)
		catf(line, sizeof(line), "%s+%d more", shapes[0] ? "; " : "", shapes_left);
	if (n_shapes)
		catf(line, sizeof(line), ")");
	if (n_classes) {
		/* the classes named up to the budget, cut at a comma, then how many more */
		size_t cut = strlen(classes);
		int shown = n_classes;
		while (cut > CLASSES_BUDGET && shown > 1) {
			while (cut > 0 && classes[cut - 1] != ',')
				cut--;
			cut -= cut > 0;
			shown--;
		}
		catf(line, sizeof(line), " under %d input class%s (%.*s", n_classes, n_classes == 1 ? "" : "es", (int)cut,
		     classes);
		if (shown < n_classes)
			catf(line, sizeof(line), ", +%d more", n_classes - shown);
		catf(line, sizeof(line), ")");
	}
	catf(line, sizeof(line), "; every one in the JSON report");
	fprintf(f, "    %-24s %s\n", "", ts(tp, line));
}

/* A module task's lines: the mode its Model ran in, what was drawn per trial and what was kept,
 * and each shape dropped because the Model refuses it. */
static void module_lines(FILE *f, struct tpool *tp, const struct kg_verdict *v)
{
	const struct kg_module_report *m = &v->module;
	if (!m->present)
		return;
	char line[1600];
	line[0] = '\0';
	for (int pass = 0; pass < 2; pass++) {
		const char *how = pass ? "kept" : "drawn";
		int n = 0;
		for (int i = 0; i < m->n_entries; i++) {
			const struct kg_module_entry *x = &m->entries[i];
			if (strcmp(x->how, how))
				continue;
			const char *what = !strcmp(x->kind, "statistic")  ? " (a statistic)"
					   : !strcmp(x->kind, "variance") ? " (a variance, positive)"
									  : "";
			catf(line, sizeof(line), "%s%s [%s]%s",
			     n++    ? ", "
			     : pass ? "; kept at the constructor's values: "
				    : "; drawn per trial: ",
			     x->name, x->shape, what);
		}
	}
	if (m->n_more)
		catf(line, sizeof(line), "; and %d more (the JSON report has every one)", m->n_more);
	fprintf(f, "module: %s mode (%s)%s\n", ts(tp, m->mode),
		!strcmp(m->mode_from, "policy") ? "the policy's module_mode"
		: !strcmp(m->mode, "train")     ? "as the problem leaves it: KernelBench never calls eval()"
						: "as the problem's constructor leaves it",
		ts(tp, line));
	for (int i = 0; i < m->n_dropped; i++)
		fprintf(f, "module: shape %s dropped, the Model itself refuses it: %s\n", ts(tp, m->dropped[i].shape),
			ts(tp, m->dropped[i].why));
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
		int first = 0;
		while (first < i && !same_kind(&v->reasons[first], &v->reasons[i]))
			first++;
		if (first < i)
			continue; /* counted on the line under the first of its kind */
		reason_in_full(f, &tp, &v->reasons[i]);
		repeats_line(f, &tp, v, i);
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
			fprintf(f, "  baseline  %-9s %10.4f ms  [spread %.1f%%] speedup %.3fx%s\n", ts(&tp, b->name), b->median_ms,
				100 * b->spread, b->speedup,
				i == v->best_baseline ? (i ? " (the faster of eager and compile: the speedup to quote)"
							    : " (the speedup to quote: no torch baseline timed)")
						      : "");
		else
			fprintf(f, "  baseline  %-9s %s\n", ts(&tp, b->name), ts(&tp, b->status));
	}
	module_lines(f, &tp, v);
	if (v->input_order[0] && !v->accepted && !strcmp(v->backend, "torch"))
		fprintf(f, "note: ModelNew's parameters and buffers take the Model's by name, shape and dtype first, "
			   "then a parameter by shape where one of each side is left; with the forward's inputs first, "
			   "the task's tensors are: %s\n",
			ts(&tp, v->input_order));
	else if (v->input_order[0] && !v->accepted)
		fprintf(f, "note: kg_forward gets this task's inputs in this order (the Model's parameters and running "
			   "statistics in state_dict order; its other buffers are kept, not inputs): %s\n",
			ts(&tp, v->input_order));
	if (v->constants[0])
		fprintf(f, "constants: %s, passed to the forward as they are\n", ts(&tp, v->constants));
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
