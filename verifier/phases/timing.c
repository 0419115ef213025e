/* The timing phase: warm-up and timed calls of the reference and the candidate, alternating, each
 * on inputs nobody has seen before (of every seeded class the base shape is checked on: zeros,
 * ones and identity repeat, and stay in the correctness trials), in a keyed order, interleaved with
 * checked calls at the variant shapes, every call cold (as in the correctness phase): no call tells
 * the candidate it is timed. Every timed output is checked again (check.stale_result), and every
 * claim is held against the trusted clock: the parent's own measures of the call (a host call's
 * CPU time from before its inputs were written to its process stopped), calibrated on calls that
 * did nothing before the .so was loaded, and against the machine's measured ceilings (the clock's
 * arithmetic is judge/clock.c's; the reference's measurement on a quiet device trial_ref.c's). */
#include "verifier/judge/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "verifier/plan/prng.h"
#include "verifier/steps.h"
#include "verifier/phases/phases.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"

#define SEED_TIMING 0x74696d65000ull
#define SEED_ORDER 0x6f72646572000ull
#define SEED_DECOY 0x6465636f79000ull

/* The ceilings are measured in this thread's CPU time, as a host candidate's calls are bounded:
 * a busy machine slows both alike and lowers neither. */
static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
		double t0 = thread_cpu_s();
		memcpy(b, a, n);
		double s = thread_cpu_s() - t0;
		a[i] = b[n - 1 - (size_t)i]; /* keep the copies observable */
		if (s > 0 && 2.0 * (double)n / s / 1e9 > best)
			best = 2.0 * (double)n / s / 1e9;
	}
out:
	free(a);
	free(b);
	return best;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* One core's fp32 FMA rate: eight independent chains of eight lanes, the most any honest kernel's
 * arithmetic can reach on it. */
__attribute__((target("avx2,fma"))) static double fma_gflops(void)
{
	__m256 a[8], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
	for (int i = 0; i < 8; i++)
		a[i] = _mm256_set1_ps((float)i);
	const long iters = 4000000;
	double t0 = thread_cpu_s();
	for (long n = 0; n < iters; n++)
		for (int i = 0; i < 8; i++)
			a[i] = _mm256_fmadd_ps(a[i], m, c);
	double s = thread_cpu_s() - t0;
	volatile float sink = 0;
	for (int i = 0; i < 8; i++)
		sink += _mm256_cvtss_f32(a[i]);
	(void)sink;
	return s > 0 ? (double)iters * 8 * 8 * 2 / s / 1e9 : 0;
}
#endif

/* The compute ceiling of one of the parent's cores (the best of five), 0 where not measured. */
static double cpu_peak_gflops(void)
{
	double best = 0;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		for (int i = 0; i < 5; i++) {
			double g = fma_gflops();
			best = g > best ? g : best;
		}
#endif
	return best;
}

/* Throughput, roofline and the speed gate from accepted timings; 1 when the reported time beats
 * a measured ceiling. */
static int figures(struct kg_run *r)
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
	v->ceiling_gflops = !p->be->needs_gpu && flops > 0 ? cpu_peak_gflops() : 0;
	if (v->ceiling_gbps > 0 && bytes > 0)
		v->roofline = v->cand_gbps / v->ceiling_gbps;
	/* the trusted clock's last line: nothing honest moves its bytes or does its arithmetic faster
	 * than the machine can (a device's ceiling is the whole device; the CPU's, one core per thread
	 * the candidate may run) */
	char why[200];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int par = !p->be->needs_gpu && p->pol.threads ? (int)(ncpu > 1 ? ncpu : 1) : 1;
	int beyond = kg_timing_beyond_ceiling(bytes, flops, v->cand.median_ms, v->ceiling_gbps, v->ceiling_gflops,
					      par, why, sizeof(why));
	if (beyond)
		kg_verdict_add_reason(v, KG_R_TIMING_TAMPERED,
				      "the reported %.4f ms means %s (more than %.0fx it): work was done outside the "
				      "span the trusted side timed",
				      v->cand.median_ms, why, KG_CEILING_MARGIN);
	if (p->pol.min_speedup > 0 && v->speedup < p->pol.min_speedup)
		kg_verdict_add_reason(v, KG_R_TIMING_TOO_SLOW,
				      "speedup %.3fx over the reference is below the policy's gate %.3fx", v->speedup,
				      p->pol.min_speedup);
	return beyond;
}

/* The tamper verdict; 1 when the claims were forged. */
static int judge(struct kg_run *r, const struct kg_timed_call *calls, int n, const struct kg_clock_cal *cal,
		 uint32_t sets)
{
	struct kg_tamper t;
	kg_timing_tamper(calls, n, cal, &t);
	if (t.impossible >= 0) {
		kg_verdict_add_reason(r->v, KG_R_TIMING_TAMPERED,
				      "the candidate's runner claimed a call took longer than the parent's round trip "
				      "(iteration %d): its timing channel is forged",
				      t.impossible);
	} else if (r->cs.l2_flags) {
		kg_verdict_add_reason(r->v, KG_R_TIMING_TAMPERED,
				      "the candidate changed the L2's persisting controls (%s%s%s): data kept in L2 across "
				      "the flush before each timed call; the runner undid it after every call",
				      r->cs.l2_flags & KG_RUN_L2_LIMIT ? "a persisting set-aside, cuCtxSetLimit" : "",
				      r->cs.l2_flags == (KG_RUN_L2_LIMIT | KG_RUN_L2_WINDOW) ? "; " : "",
				      r->cs.l2_flags & KG_RUN_L2_WINDOW ? "an access-policy window on the given stream" : "");
	} else if (t.forged) {
		const struct kg_timed_call *c = &calls[t.first_lie];
		kg_verdict_add_reason(r->v, KG_R_TIMING_TAMPERED,
				      "the candidate's runner claimed %.4f ms for a call whose trusted bound is %.4f ms (%s; "
				      "%d of %d timed calls fall short of it): work is hidden from the runner's clock",
				      (double)c->child_ns / 1e6 / sets, (double)kg_timing_bound(c, cal) / 1e6 / sets,
				      cal->cpu_clock ? "the CPU time the kernel charged its process, less a call that does nothing"
						     : "the parent's round trip, less a call that does nothing",
				      t.lies * (int)sets, n * (int)sets);
	} else {
		return 0;
	}
	return 1;
}

/* The classes the base shape is checked on whose inputs depend on the trial's key (zeros, ones
 * and identity are the same in every trial: a timed call of one would repeat what an earlier call
 * saw, and a cache keyed on content would serve it), each as often as the others, in a keyed
 * order: the timed calls draw from the same distribution as the checked ones. */
static int class_schedule(const struct kg_plan *p, enum kg_input_class *out, int n)
{
	enum kg_input_class k[KG_CLASS_COUNT_];
	int nk = kg_plan_timed_classes(p, k);
	for (int i = 0; i < n; i++)
		out[i] = k[i % nk];
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(kg_seed_derive(p->master_seed, SEED_ORDER + (uint64_t)i) % (uint64_t)(i + 1));
		enum kg_input_class x = out[i];
		out[i] = out[j];
		out[j] = x;
	}
	return nk;
}

/* One call of both sides on fresh inputs of class cls, flushed, and the checks over it; wrong is
 * the code a wrong output earns; timed: the reference's is a measurement, taken on a quiet device
 * (kg_trial_ref_quiet). 0 when it passed. */
static int checked_call(struct kg_run *r, enum kg_input_class cls, uint64_t seed, enum kg_reason_code wrong,
			const char *when, int timed, uint64_t *ref_ns, struct kg_cand_call *c)
{
	struct kg_view v;
	struct kg_findings f = {0};
	kg_trial_gen_inputs(r, cls, seed);
	if (timed ? kg_trial_ref_quiet(r, 1, ref_ns) : kg_trial_reference(r, 1, ref_ns))
		return -1;
	kg_trial_candidate(r, 1, cls, seed, c);
	if (r->cand_dead)
		return -1;
	uint64_t t0 = kg_now_ns();
	kg_trial_view(r, &v);
	kg_trial_view_inputs(r, &v);
	int judged = c->ok ? kg_trial_device_judge(r) : kg_trial_refout_host(r) || kg_trial_candout_host(r) ? -1 : 0;
	if (judged == -2)
		kg_run_cand_failed(r, KG_SESSION_ENDED, NULL, "after kg_forward returned", "CHECK", cls, seed, 1);
	if (judged < 0)
		return -1;
	v.outputs_judged = judged;
	kg_check_canaries(&v, &f);
	kg_check_inputs(&v, &f);
	kg_check_unwritten(&v, &f);
	if (c->ok)
		kg_trial_check_outputs(r, &v, wrong, &f);
	kg_check_tail(c->r.tail_ns, c->r.child_ns, &f);
	kg_steps_add(KG_STEP_CHECKS, t0);
	kg_run_record(r, &f, cls, seed, when);
	return f.n || !c->ok ? -1 : 0;
}

/* Now and then a checked call at a variant shape between timed ones (keyed): the base shape
 * coming back after the variants marks nothing. */
static int decoy(struct kg_run *r, int i)
{
	const struct kg_plan *p = r->plan;
	if (p->n_shapes < 2)
		return 0;
	uint64_t d = kg_seed_derive(p->master_seed, SEED_DECOY + (uint64_t)i);
	if (d % 3)
		return 0;
	int s = 1 + (int)((d >> 8) % (uint64_t)(p->n_shapes - 1));
	if (r->dropped[s]) /* a shape the Model refuses has no reference to check against */
		return 0;
	enum kg_input_class cls = (enum kg_input_class)((d >> 24) % KG_CLASS_COUNT_);
	if (!kg_plan_trials(p, 0, cls))
		cls = KG_CLASS_NORMAL;
	uint64_t ns;
	struct kg_cand_call c;
	if (kg_run_set_shape(r, s, "during timing"))
		return -1;
	/* every shape passed its checks before timing began: a wrong result here is a kernel that
	 * changed once timed (check.stale_result), whichever shape the decoy drew */
	if (checked_call(r, cls, kg_seed_derive(d, 1), KG_R_CHECK_STALE_RESULT, "during timing", 0, &ns, &c))
		return -1;
	return kg_run_set_shape(r, 0, "during timing");
}

/* The most the runner's copy of the base shape's outputs on the call's stream may take: twice a
 * copy at the trusted ceiling (the reference runner's, where it is a device), plus 50 us; at 1 TB/s
 * where no ceiling was measured. */
static uint64_t snap_cap(const struct kg_run *r)
{
	/* the keeper's copies are subtracted at their least (session_call.c), never more */
	if (r->cs.keeper)
		return UINT64_MAX;
	const struct kg_arena *a = &r->ca;
	if (!r->plan->be->needs_gpu)
		return 0;
	double bytes = 0;
	for (int j = 0; j < a->n_out; j++)
		bytes += (double)a->slot[a->n_in + j].bytes;
	uint64_t mbps = r->plan->ref_be->needs_gpu && r->rs.ceiling_mbps ? r->rs.ceiling_mbps : 1000000;
	return (uint64_t)(2.0 * 2.0 * bytes * 1000.0 / (double)mbps) + 50000u;
}

/* The sets a batch may take: the arenas' room, and no more than KG_BATCH_TERMS_SETS where an
 * output's tolerance is the reference's own per element (terms: reference): the device judges
 * without it, and every set it finds outside the plain bound is judged again on the host, with a
 * call of the reference's kg_error_terms on that set's inputs. */
static uint32_t batch_room(const struct kg_run *r)
{
	for (int j = 0; j < r->plan->task.n_outputs; j++)
		if (r->plan->task.outputs[j].terms == KG_TERMS_REFERENCE && r->batch_room > KG_BATCH_TERMS_SETS)
			return KG_BATCH_TERMS_SETS;
	return r->batch_room;
}

/* The calls back to back one measurement takes on a device (1: none): enough to fill
 * KG_BATCH_TARGET_MS at the slower side's trusted time for one call, within the arenas' room. */
static uint32_t batch_for(const struct kg_run *r, uint64_t ref_ns, const struct kg_timed_call *c,
			  const struct kg_clock_cal *cal)
{
	if (r->batch_room < 2 || !r->dev_gen || !r->dev_check || !r->rs.keeper || !r->cs.keeper)
		return 1;
	uint64_t cand_ns = kg_timing_reported(c, cal);
	double call_ms = (double)(ref_ns > cand_ns ? ref_ns : cand_ns) / 1e6;
	return kg_timing_batch_sets(call_ms, batch_room(r), KG_BATCH_TARGET_MS);
}

/* A batch's measurements are of one class (the task's normal inputs where its base shape is
 * checked on them): what kernel time a class costs is the user's to rank by, not the spread's. */
static enum kg_input_class batch_class(const struct kg_plan *p)
{
	enum kg_input_class k[KG_CLASS_COUNT_];
	int nk = kg_plan_timed_classes(p, k);
	for (int i = 0; i < nk; i++)
		if (k[i] == KG_CLASS_NORMAL)
			return KG_CLASS_NORMAL;
	return k[0];
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
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct kg_clock_cal cal = {
		.run_ns = r->cs.cal_run_ns,
		.span_ns = r->cs.cal_span_ns,
		.cpu_ns = r->cs.cal_cpu_ns,
		.cpu_clock = p->be->cpu_clock && r->cs.has_cpu_clock,
		.par = p->pol.threads ? (int)(ncpu > 1 ? ncpu : 1) : 1,
		.noise_scale = getenv("KGATE_SANITIZE") ? 4 : 1,
		.set_ns = r->cs.cal_set_ns,
	};
	double *cms = calloc((size_t)n, sizeof(double)), *rms = calloc((size_t)n, sizeof(double));
	double *pms = calloc((size_t)n, sizeof(double)), *ex = calloc((size_t)n, sizeof(double));
	struct kg_timed_call *calls = calloc((size_t)n, sizeof(*calls));
	enum kg_input_class *sched = calloc((size_t)(n + w), sizeof(*sched));
	if (!cms || !rms || !pms || !ex || !calls || !sched) {
		kg_run_internal(r, "out of memory for timing");
		goto out;
	}
	/* timing is at the base shape, whatever shape the correctness trials ended on */
	if (kg_run_set_shape(r, 0, "while setting up the timing"))
		goto out;
	cal.snap_cap_ns = snap_cap(r);
	class_schedule(p, sched, n + w);
	uint32_t sets = 1;
	if (w == 0 && r->batch_room >= 2)
		w = 1; /* one call to size the batch by */
	for (int i = -w; i < n && !r->cand_dead && !r->v->internal_error[0]; i++) {
		if (i == 0 && sets > 1) {
			/* a measurement of a batch holds `sets` calls: the policy's count of calls, in at
			 * least KG_BATCH_MIN_MEASURES spans */
			int nb = (int)(((uint64_t)n + sets - 1) / sets);
			n = nb < KG_BATCH_MIN_MEASURES ? (n < KG_BATCH_MIN_MEASURES ? n : KG_BATCH_MIN_MEASURES) : nb;
		}
		/* Every iteration, warm-up included, sees inputs nobody has seen before: a result cached by
		 * pointer or by content cannot be served, and the re-check catches a stale one. */
		uint64_t seed = kg_seed_derive(p->master_seed, SEED_TIMING + (uint64_t)(i + w));
		enum kg_input_class cls = sets > 1 ? batch_class(p) : sched[i + w];
		uint64_t ref_ns;
		struct kg_cand_call c;
		kg_run_progress(r, "timing %d/%d", i < 0 ? 0 : i + 1, n);
		if (decoy(r, i + w) ||
		    (sets > 1 ? kg_timing_batched(r, sets, cls, seed, &ref_ns, &c)
			      : checked_call(r, cls, seed, KG_R_CHECK_STALE_RESULT, "during timing", 1, &ref_ns, &c)))
			break;
		if (i == -1 && sets == 1) {
			struct kg_timed_call one = {.child_ns = c.r.child_ns, .span_ns = c.r.span_ns, .snap_ns = c.r.snap_ns, .sets = 1};
			sets = batch_for(r, ref_ns, &one, &cal);
			/* the first batch warms what a batch touches (every set's pages), untimed, and sizes
			 * the batch again at its own time a call: one call's span is mostly latency */
			if (sets > 1 && kg_timing_batched(r, sets, batch_class(p), kg_seed_derive(seed, 2), &ref_ns, &c))
				break;
			if (sets > 1) {
				struct kg_timed_call all = {
					.child_ns = c.r.child_ns, .span_ns = c.r.span_ns, .snap_ns = c.r.snap_ns, .sets = c.r.sets};
				double per_ms = (double)(ref_ns > kg_timing_reported(&all, &cal) ? ref_ns : kg_timing_reported(&all, &cal)) /
						1e6 / sets;
				uint32_t again = kg_timing_batch_sets(per_ms, batch_room(r), KG_BATCH_TARGET_MS);
				sets = again > sets ? again : sets;
			}
		}
		if (i < 0)
			continue;
		calls[i] = (struct kg_timed_call){
			.child_ns = c.r.child_ns,
			.parent_ns = c.r.parent_ns,
			.span_ns = c.r.span_ns,
			.tail_ns = c.r.tail_ns,
			.snap_ns = c.r.snap_ns,
			.cpu_ns = c.r.cpu_ns,
			.cpu_known = c.r.cpu_known,
			.thread_cpu_ns = c.r.thread_cpu_ns,
			.thread_known = c.r.thread_known,
			.sets = c.r.sets,
		};
		/* a batch's figures are its span's, shared out among its calls */
		ex[i] = (double)r->ref_excess_ns / 1e6;
		rms[i] = (double)ref_ns / 1e6 / sets;
		/* the reported time never undercuts what the parent itself measured of the call */
		cms[i] = (double)kg_timing_reported(&calls[i], &cal) / 1e6 / sets;
		pms[i] = (double)c.r.parent_ns / 1e6 / sets;
		if (getenv("KGATE_DEBUG_TIMING")) /* what each side cost the host beyond its claim, per call */
			fprintf(stderr, "[kgate] timed %d (%s): cand claim %.1f us cpu %.1f us bound %.1f us (cal %.1f); ref claim %.1f "
					"us excess %.1f us\n",
				i, kg_class_name(cls), (double)c.r.child_ns / 1e3 / sets, (double)c.r.cpu_ns / 1e3,
				(double)kg_timing_bound(&calls[i], &cal) / 1e3, (double)cal.cpu_ns / 1e3, (double)ref_ns / 1e3,
				(double)r->ref_excess_ns / 1e3);
	}
	if (!kg_run_ok(r))
		goto out;
	kg_timing_stats(cms, n, &r->v->cand);
	kg_timing_stats(rms, n, &r->v->ref);
	r->v->cand.batch = r->v->ref.batch = (int)sets;
	struct kg_timing pt;
	kg_timing_stats(pms, n, &pt);
	r->v->cand.parent_median_ms = pt.median_ms;
	/* the host's noise is the median of the reference's excesses: load that lasts shows in most of
	 * them, while one call's spike (seen: 0.4 ms on a quiet machine) would hide a forger's lies */
	struct kg_timing et;
	kg_timing_stats(ex, n, &et);
	cal.host_noise_ns = (uint64_t)(et.median_ms * 1e6);
	if (judge(r, calls, n, &cal, sets)) {
		/* a forged claim makes every derived figure meaningless: report the parent's view only */
		kg_verdict_add_check(r->v, "timing", KG_CHECK_FAIL, kg_run_secs_since(t0),
				     "the runner's time claims contradict the parent's clocks (parent median %.4f ms)",
				     pt.median_ms);
		goto out;
	}
	int beyond = figures(r);
	char bt[200] = "";
	if (sets > 1)
		snprintf(bt, sizeof(bt), "; %u calls back to back a measurement", sets);
	if (r->cs.keeper) /* how the device's clock took each call's ends */
		snprintf(bt + strlen(bt), sizeof(bt) - strlen(bt), "; %s%.80s", r->cs.gated ? "gated" : "ungated: ",
			 r->cs.gated ? "" : r->cs.gate_off);
	kg_verdict_add_check(r->v, "timing", beyond ? KG_CHECK_FAIL : KG_CHECK_PASS, kg_run_secs_since(t0),
			     "candidate median %.4f ms (spread %.1f%%), reference %.4f ms, speedup %.3fx%s%s",
			     r->v->cand.median_ms, 100 * r->v->cand.spread, r->v->ref.median_ms, r->v->speedup,
			     bt,
			     r->v->cand.spread > p->pol.max_spread ? " (noisy: spread above the policy's bound)" : "");
out:
	r->v->t_timing_s = kg_run_secs_since(t0);
	free(cms);
	free(rms);
	free(pms);
	free(ex);
	free(calls);
	free(sched);
}
