/* The timing phase: warm-up and timed calls of the reference and the candidate, alternating, each
 * on inputs nobody has seen before with caches flushed; every timed output is checked again
 * (check.stale_result), and the runner's claims are held against the parent's clock. */
#include "verifier/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/prng.h"
#include "verifier/run.h"

#define SEED_TIMING 0x74696d65000ull

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void kg_timing_stats(double *ms, int n, struct kg_timing *t)
{
	memset(t, 0, sizeof(*t));
	if (n <= 0)
		return;
	qsort(ms, (size_t)n, sizeof(double), cmp_double);
	t->n = n;
	t->min_ms = ms[0];
	t->max_ms = ms[n - 1];
	t->median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
	t->p10_ms = ms[(int)floor(0.1 * (n - 1))];
	t->p90_ms = ms[(int)ceil(0.9 * (n - 1))];
	t->spread = t->median_ms > 0 ? (t->p90_ms - t->p10_ms) / t->median_ms : 0;
}

void kg_timing_tamper(const struct kg_timed_call *calls, int n, uint64_t overhead_ns, struct kg_tamper *t)
{
	t->impossible = -1;
	t->min_hidden_share = n > 0 ? INFINITY : 0;
	for (int i = 0; i < n; i++) {
		const struct kg_timed_call *c = &calls[i];
		/* the runner's clock runs inside the parent's round trip: a longer claim is impossible */
		if (c->child_ns > c->parent_ns + 20000 && t->impossible < 0)
			t->impossible = i;
		double g = (double)c->span_ns - (double)overhead_ns - (double)c->child_ns - (double)c->tail_ns;
		double share = g < 1e6 || !c->span_ns ? 0 : g / (double)c->span_ns;
		if (share < t->min_hidden_share)
			t->min_hidden_share = share;
	}
}

static double cpu_copy_gbps(void)
{
	size_t n = 64u << 20; /* well past any per-core cache, cheap to fault in */
	char *a = malloc(n), *b = malloc(n);
	double best = 0;
	if (!a || !b)
		goto out;
	memset(a, 1, n);
	memset(b, 2, n);
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = kg_now_ns();
		memcpy(b, a, n);
		double s = kg_secs_since(t0);
		a[i] = b[n - 1 - (size_t)i]; /* keep the copies observable */
		if (s > 0 && 2.0 * (double)n / s / 1e9 > best)
			best = 2.0 * (double)n / s / 1e9;
	}
out:
	free(a);
	free(b);
	return best;
}

/* Throughput, roofline and the speed gate from accepted timings. */
static void figures(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	struct kg_verdict *v = r->v;
	v->timed = 1;
	v->speedup = v->cand.median_ms > 0 ? v->ref.median_ms / v->cand.median_ms : 0;
	double bytes = 0, flops = 0;
	kg_task_cost(&p->task, p->task.cost_bytes, &p->shapes[0], &bytes);
	kg_task_cost(&p->task, p->task.cost_flops, &p->shapes[0], &flops);
	v->bytes = bytes;
	v->flops = flops;
	if (v->cand.median_ms > 0) {
		v->cand_gbps = bytes / (v->cand.median_ms * 1e-3) / 1e9;
		v->cand_gflops = flops / (v->cand.median_ms * 1e-3) / 1e9;
	}
	/* The ceiling comes from the trusted side: the reference's runner where it measured one (a
	 * device), the parent otherwise. */
	if (p->be->needs_gpu && p->ref_be->needs_gpu)
		r->gpu.copy_gbps = (double)r->rs.ceiling_mbps / 1000.0;
	v->ceiling_gbps = p->be->needs_gpu ? r->gpu.copy_gbps : cpu_copy_gbps();
	if (v->ceiling_gbps > 0 && bytes > 0)
		v->roofline = v->cand_gbps / v->ceiling_gbps;
	if (p->pol.min_speedup > 0 && v->speedup < p->pol.min_speedup)
		kg_verdict_add_reason(v, KG_R_TIMING_TOO_SLOW,
				      "speedup %.3fx over the reference is below the policy's gate %.3fx", v->speedup,
				      p->pol.min_speedup);
}

/* The tamper verdict; 1 when the claims were forged. */
static int judge(struct kg_run *r, const struct kg_timed_call *calls, int n, double parent_median_ms)
{
	struct kg_tamper t;
	kg_timing_tamper(calls, n, r->cs.nop_ns + r->ref_download_ns, &t);
	if (t.impossible >= 0) {
		kg_verdict_add_reason(r->v, KG_R_TIMING_TAMPERED,
				      "the candidate's runner claimed a call took longer than the parent's round trip "
				      "(iteration %d): its timing channel is forged",
				      t.impossible);
	} else if (r->cs.forged) {
		kg_verdict_add_reason(r->v, KG_R_TIMING_TAMPERED,
				      "%u message(s) on the runner's control channel answered no pending command: something "
				      "in the candidate's process forged the result channel",
				      r->cs.forged);
	} else if (t.min_hidden_share > KG_TAMPER_HIDDEN_SHARE) {
		kg_verdict_add_reason(r->v, KG_R_TIMING_TAMPERED,
				      "the candidate's runner claimed %.3f ms per call while the parent measured %.3f ms "
				      "round trips (channel overhead %.3f ms) in every call: work is hidden outside the "
				      "timed region",
				      r->v->cand.median_ms, parent_median_ms, (double)r->cs.nop_ns / 1e6);
	} else {
		return 0;
	}
	return 1;
}

void kg_phase_timing(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	uint64_t t0 = kg_now_ns();
	int n = p->iterations, w = p->warmup;
	if (n <= 0) {
		kg_verdict_add_check(r->v, "timing", KG_CHECK_SKIP, 0, "no timed iterations requested");
		return;
	}
	double *cms = calloc((size_t)n, sizeof(double)), *rms = calloc((size_t)n, sizeof(double));
	double *pms = calloc((size_t)n, sizeof(double));
	struct kg_timed_call *calls = calloc((size_t)n, sizeof(*calls));
	if (!cms || !rms || !pms || !calls) {
		kg_run_internal(r, "out of memory for timing");
		goto out;
	}
	/* timing is at the base shape, whatever shape the correctness trials ended on */
	if (kg_run_set_shape(r, 0, "while setting up the timing"))
		goto out;
	for (int i = -w; i < n && !r->cand_dead && !r->v->internal_error[0]; i++) {
		/* Every iteration, warm-up included, sees inputs nobody has seen before: a result cached by
		 * pointer or by content cannot be served, and the re-check catches a stale one. */
		uint64_t seed = kg_seed_derive(p->master_seed, SEED_TIMING + (uint64_t)(i + w));
		uint64_t ref_ns;
		struct kg_cand_call c;
		struct kg_view v;
		struct kg_findings f = {0};
		kg_run_progress(r, "timing %d/%d", i < 0 ? 0 : i + 1, n);
		kg_run_gen_inputs(r, KG_CLASS_NORMAL, seed);
		if (kg_run_reference(r, 1, &ref_ns))
			break;
		kg_run_candidate(r, 1, KG_CLASS_NORMAL, seed, &c);
		if (r->cand_dead)
			break;
		kg_run_view(r, &v);
		kg_check_canaries(&v, &f);
		kg_check_inputs(&v, &f);
		kg_check_unwritten(&v, &f);
		if (c.ok)
			kg_check_outputs(&v, KG_R_CHECK_STALE_RESULT, &f);
		kg_check_tail(c.r.tail_ns, c.r.child_ns, &f);
		kg_run_record(r, &f, KG_CLASS_NORMAL, seed, "during timing");
		if (f.n || !c.ok)
			break;
		if (i < 0)
			continue;
		rms[i] = (double)ref_ns / 1e6;
		cms[i] = (double)c.r.child_ns / 1e6;
		pms[i] = (double)c.r.parent_ns / 1e6;
		calls[i] = (struct kg_timed_call){c.r.child_ns, c.r.parent_ns, c.r.span_ns, c.r.tail_ns};
	}
	if (!kg_run_ok(r))
		goto out;
	kg_timing_stats(cms, n, &r->v->cand);
	kg_timing_stats(rms, n, &r->v->ref);
	struct kg_timing pt;
	kg_timing_stats(pms, n, &pt);
	r->v->cand.parent_median_ms = pt.median_ms;
	if (judge(r, calls, n, pt.median_ms)) {
		/* a forged claim makes every derived figure meaningless: report the parent's view only */
		kg_verdict_add_check(r->v, "timing", KG_CHECK_FAIL, kg_secs_since(t0),
				     "the runner's time claims contradict the parent's clock (parent median %.4f ms)",
				     pt.median_ms);
		goto out;
	}
	figures(r);
	kg_verdict_add_check(r->v, "timing", KG_CHECK_PASS, kg_secs_since(t0),
			     "candidate median %.4f ms (spread %.1f%%), reference %.4f ms, speedup %.3fx%s",
			     r->v->cand.median_ms, 100 * r->v->cand.spread, r->v->ref.median_ms, r->v->speedup,
			     r->v->cand.spread > p->pol.max_spread ? " (noisy: spread above the policy's bound)" : "");
out:
	r->v->t_timing_s = kg_secs_since(t0);
	free(cms);
	free(rms);
	free(pms);
	free(calls);
}
