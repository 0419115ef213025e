/* The terminal summary (`kgate verify` without -q, and `--report text:PATH`): the verdict, its
 * reasons, the checks and the measurements, for a person to read. Every string a candidate can
 * influence goes through kg_text on one line; the full record is the JSON report (report.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_text.h"
#include "verifier/report_int.h"
#include "verifier/verdict.h"

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
