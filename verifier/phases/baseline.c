/* The baselines a candidate's speed is quoted against: eager PyTorch and torch.compile of the
 * problem's Model (a module task), or of the torch module a manifest names (`baseline: torch:`),
 * each hosted by a trusted torch runner of its own and timed by the same protocol as the reference
 * and the candidate, in the same run, once the candidate's timing passed: on a GPU by kgate-device's
 * span, on fresh inputs drawn under the run's key, in batches of as many calls as the candidate's
 * measurements held; on the host by the runner's clock, as the host reference is. kgate's own
 * reference stays a row of its own; the speedup to quote is against the faster of eager and
 * compile, and says which. The baseline's runner takes over the candidate's device arena (its
 * process gone), so a nominal shape needs no third arena's memory. It applies no run filter (a
 * trusted module; torch.compile starts compiler processes), and its compiler writes only to a
 * directory of this run's. Its outputs are not judged: it is what the candidate is measured
 * against, not what it is checked against. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kg_ufile.h"
#include "verifier/plan/resolve.h"
#include "verifier/phases/phases.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"
#include "verifier/judge/clock.h"
#include "verifier/plan/torchtask.h"
#include "verifier/plan/prng.h"

/* the timing's seeds for baseline calls: public ids, the data comes from the run's key */
#define SEED_BASELINE 0x62617365000000ull

enum { ROW_REF, ROW_EAGER, ROW_COMPILE };

static struct kg_baseline *row(struct kg_verdict *v, int i)
{
	return &v->baselines[i];
}

/* The three rows as far as nothing was timed: the reference's from the timing, eager and compile
 * with why they were not (what was asked of the host, or that the candidate was never timed). */
static void rows_untimed(struct kg_run *r, const char *why)
{
	struct kg_verdict *v = r->v;
	v->n_baselines = 3;
	v->best_baseline = -1;
	struct kg_baseline *b = row(v, ROW_REF);
	snprintf(b->name, sizeof(b->name), "reference");
	snprintf(b->how, sizeof(b->how), "kgate's %s reference%s", r->plan->ref_be->name,
		 r->plan->ref_be->needs_gpu ? ", on the device, kgate-device's span" : "");
	if (v->timed) {
		b->timed = 1;
		b->median_ms = v->ref.median_ms;
		b->p10_ms = v->ref.p10_ms;
		b->p90_ms = v->ref.p90_ms;
		b->spread = v->ref.spread;
		b->n = v->ref.n;
		b->batch = v->ref.batch;
		b->speedup = v->speedup;
		v->best_baseline = ROW_REF;
	} else {
		snprintf(b->status, sizeof(b->status), "not timed");
	}
	snprintf(row(v, ROW_EAGER)->name, sizeof(row(v, ROW_EAGER)->name), "eager");
	snprintf(row(v, ROW_COMPILE)->name, sizeof(row(v, ROW_COMPILE)->name), "compile");
	for (int i = ROW_EAGER; i <= ROW_COMPILE; i++)
		snprintf(row(v, i)->status, sizeof(row(v, i)->status), "%s", why);
}

/* The quoted speedup: the faster of eager and compile where either was timed, else the reference. */
static void pick_best(struct kg_verdict *v)
{
	int best = -1;
	for (int i = ROW_EAGER; i <= ROW_COMPILE; i++)
		if (row(v, i)->timed && (best < 0 || row(v, i)->median_ms < row(v, best)->median_ms))
			best = i;
	if (best >= 0)
		v->best_baseline = best;
}

/* The baseline module staged in the run's work directory (as the reference's is), its source from
 * the task's file read as any source kgate reads. */
static int stage_module(struct kg_run *r, char *out, size_t outsz, kg_error *e)
{
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/baseline", r->work);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return kg_err(e, -errno, "mkdir %s: %s", dir, strerror(errno));
	snprintf(out, outsz, "%s/problem.py", dir);
	struct kg_ufile src = {0};
	int rc = kg_ufile_read(r->plan->task.baseline_torch, "baseline", KG_SOURCE_MAX, &src, e);
	if (!rc)
		rc = kg_write_file(out, src.data, src.len, 0644, e);
	kg_ufile_free(&src);
	return rc;
}

/* The baseline runner's state file (torchtask.h), into out: a module task's own Model's is the run's
 * (built for the reference); a manifest's baseline module gets one of its own, built by the same
 * sandboxed state job, every task input its forward's (tasks/README.md). */
static int baseline_state(struct kg_run *r, const char *module, char *out, size_t outsz, kg_error *e)
{
	const struct kg_plan *p = r->plan;
	if (r->state_path[0] && !strcmp(p->task.baseline_torch, p->task.ref[KG_BACKEND_TORCH])) {
		snprintf(out, outsz, "%s", r->state_path);
		return 0;
	}
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/baseline", r->work);
	kg_buf spec = {0};
	struct kg_torch_state *st = calloc(1, sizeof(*st));
	int rc = st ? kg_torch_state_spec_forward(p, &spec, e) : kg_err(e, -ENOMEM, "out of memory");
	if (!rc && kg_buf_append(&spec, "", 1)) /* a C string */
		rc = kg_err(e, -ENOMEM, "out of memory");
	if (!rc)
		rc = kg_torch_state_build(module, dir, spec.data, st, e);
	if (!rc)
		snprintf(out, outsz, "%s", st->path);
	kg_buf_free(&spec);
	free(st);
	return rc;
}

struct bl_ctx {
	struct kg_run *r;
};

/* A host baseline's inputs, written into the arena once its call's clock runs (as the reference's). */
static void bl_expose(void *arg)
{
	struct kg_run *r = arg;
	if (!kg_trial_device_draw(r, r->shadow))
		kg_trial_load_inputs_from(r, &r->ca, r->shadow);
}

/* One measurement of the baseline session bs: `sets` calls of entry on fresh inputs of the timing's
 * class; *ms the time of one call (the keeper's span less a call that does nothing and its own
 * copies, never below the runner's events, over the sets; on the host the runner's clock). 0, or an
 * error with why. */
static int measure(struct kg_run *r, struct kg_session *bs, uint32_t entry, uint32_t sets, uint64_t seed,
		   double timeout_s, double *ms, char *why, size_t whysz)
{
	kg_error e = {0};
	struct kg_call_result res;
	kg_trial_gen_inputs(r, KG_CLASS_NORMAL, seed);
	if (bs->keeper)
		kg_arena_poison_pick(&r->ca, seed);
	else
		kg_arena_poison(&r->ca, seed);
	struct kg_call call = {.flush = 1, .run_timeout_s = timeout_s, .entry = entry, .expose = bl_expose, .expose_arg = r};
	if (bs->keeper && (call.draw = kg_trial_device_draw(r, r->shadow)))
		call.expose = NULL;
	if (bs->keeper && sets > 1) {
		call.sets = sets;
		call.stride = r->batch_stride;
		call.keep = 1;
	}
	int rc = kg_session_run_call(bs, &call, &res, &e);
	if (rc || res.ret) {
		if (rc == KG_SESSION_FAILED)
			snprintf(why, whysz, "%s", bs->msg);
		else if (rc == KG_SESSION_ENDED)
			snprintf(why, whysz, "its runner ended (%s)", kg_sb_end_name(bs->outcome.end));
		else
			snprintf(why, whysz, "%s", rc ? e.msg : "it returned an error");
		return -1;
	}
	uint64_t ns = res.child_ns;
	if (bs->keeper) {
		uint64_t idle = bs->cal_span_ns + res.snap_ns;
		uint64_t bound = res.span_ns > idle ? res.span_ns - idle : 0;
		if (bound > ns)
			ns = bound;
	}
	*ms = (double)ns / 1e6 / (sets > 1 ? sets : 1);
	return 0;
}

/* Eager (entry KG_ENTRY_FORWARD) or compile (KG_ENTRY_COMPILED) on bs: one call untimed (torch.compile
 * compiles there), then as many measurements as the candidate's timing took. */
static void time_row(struct kg_run *r, struct kg_session *bs, int i, uint32_t entry, const char *how)
{
	struct kg_verdict *v = r->v;
	struct kg_baseline *b = row(v, i);
	uint32_t sets = bs->keeper && v->cand.batch > 1 ? (uint32_t)v->cand.batch : 1;
	int n = v->cand.n > 0 ? v->cand.n : 1;
	double *ms = calloc((size_t)n, sizeof(double)), warm = 0;
	char why[400] = "";
	if (!ms) {
		snprintf(b->status, sizeof(b->status), "not timed: out of memory");
		return;
	}
	uint64_t base = kg_seed_derive(r->plan->master_seed, SEED_BASELINE + (uint64_t)i * 4096);
	/* the warm-up may compile for minutes; a timed call gets the reference's bound */
	double wall = r->plan->pol.wall_s > 60 ? r->plan->pol.wall_s : 60;
	int rc = measure(r, bs, entry, sets, kg_seed_derive(base, 0), wall > 600 ? wall : 600, &warm, why, sizeof(why));
	for (int k = 0; !rc && k < n; k++)
		rc = measure(r, bs, entry, sets, kg_seed_derive(base, 1 + (uint64_t)k), wall, &ms[k], why, sizeof(why));
	if (rc) {
		snprintf(b->status, sizeof(b->status), "failed: %s", why);
	} else {
		struct kg_timing t;
		kg_timing_stats(ms, n, &t);
		b->timed = 1;
		b->status[0] = '\0';
		b->median_ms = t.median_ms;
		b->p10_ms = t.p10_ms;
		b->p90_ms = t.p90_ms;
		b->spread = t.spread;
		b->n = n;
		b->batch = (int)sets;
		b->speedup = v->cand.median_ms > 0 ? t.median_ms / v->cand.median_ms : 0;
	}
	snprintf(b->how, sizeof(b->how), "%s", how);
	free(ms);
}

/* Which baselines to time (2 all, 1 eager, 0 none): the options', else $KGATE_BASELINES, else all
 * beside a device candidate and a module task's eager beside a host one (its Model is the reference
 * already there); a manifest task's torch baseline on the host only when asked (a torch process a
 * run). why says so where none. */
static int wanted(const struct kg_plan *p, char *why, size_t whysz)
{
	const char *w = getenv("KGATE_BASELINES");
	enum kg_baselines b = p->baselines;
	if (b == KG_BASELINES_AUTO && w && *w)
		b = !strcmp(w, "none") ? KG_BASELINES_NONE : !strcmp(w, "eager") ? KG_BASELINES_EAGER : KG_BASELINES_ALL;
	if (b == KG_BASELINES_AUTO)
		b = p->be->needs_gpu ? KG_BASELINES_ALL
		    : !strcmp(p->task.baseline_torch, p->task.ref[KG_BACKEND_TORCH]) ? KG_BASELINES_EAGER
										      : KG_BASELINES_NONE;
	if (b == KG_BASELINES_NONE)
		snprintf(why, whysz, "%s",
			 p->baselines == KG_BASELINES_NONE ? "not timed: not asked for (a search's rounds)"
			 : w && !strcmp(w, "none")	   ? "not timed: KGATE_BASELINES=none"
							   : "not timed on the host unless asked (KGATE_BASELINES=eager)");
	return b == KG_BASELINES_ALL ? 2 : b == KG_BASELINES_EAGER ? 1 : 0;
}

void kg_phase_baselines(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	struct kg_verdict *v = r->v;
	char py[PATH_MAX], ver[160], gpu_why[200] = "", module[PATH_MAX + 48], jit[PATH_MAX + 32], state[PATH_MAX + 48];
	if (!v->timed || !kg_run_ok(r) || r->cand_dead) {
		rows_untimed(r, "not timed: the candidate was not timed");
		return;
	}
	if (!p->task.baseline_torch[0]) {
		rows_untimed(r, "none: the task names no torch baseline (`baseline: torch: FILE.py` in its manifest)");
		return;
	}
	char why0[120];
	int want = wanted(p, why0, sizeof(why0));
	if (!want) {
		rows_untimed(r, why0);
		return;
	}
	if (kg_path_python(py, sizeof(py), ver, sizeof(ver))) {
		rows_untimed(r, "unavailable: no Python with torch");
		return;
	}
	/* where the candidate ran: a device candidate's baselines run on the device, a host one's on the
	 * host (the same clock as the candidate's) */
	const struct kg_backend *be = kg_backend_get(KG_BACKEND_TORCH);
	if (p->be->needs_gpu) {
		struct kg_gpu_info g;
		if (!kg_torch_placement(ver, &g, gpu_why, sizeof(gpu_why))) {
			char why[120];
			snprintf(why, sizeof(why), "unavailable on the device: %s", gpu_why);
			rows_untimed(r, why);
			return;
		}
		be = kg_backend_torch_device();
	}
	rows_untimed(r, "not timed");
	int compile_ok = be->needs_gpu && !strstr(ver, "no torch.compile") && want > 1;
	char tv[64]; /* "torch 1.13.0a0", the probe's words before its notes */
	snprintf(tv, sizeof(tv), "%s", ver);
	char *note = strstr(tv, " (");
	if (note)
		*note = '\0';
	if (!compile_ok && strstr(ver, "no torch.compile"))
		snprintf(row(v, ROW_COMPILE)->status, sizeof(row(v, ROW_COMPILE)->status),
			 "unavailable: %s has no torch.compile", tv);
	else if (!compile_ok)
		snprintf(row(v, ROW_COMPILE)->status, sizeof(row(v, ROW_COMPILE)->status), "%s",
			 want < 2 ? "not timed: eager only asked for"
				  : "not timed: torch.compile is timed on a GPU runner only (its compiler starts processes)");
	kg_error e = {0};
	int rc = stage_module(r, module, sizeof(module), &e);
	if (!rc)
		rc = baseline_state(r, module, state, sizeof(state), &e);
	snprintf(jit, sizeof(jit), "%s/jit-baseline", r->work);
	if (!rc && be->needs_gpu && mkdir(jit, 0755) && errno != EEXIST)
		rc = kg_err(&e, -errno, "mkdir %s: %s", jit, strerror(errno));
	if (!rc && be->needs_gpu)
		rc = kg_sb_chown_scratch(jit, &e);
	if (rc) {
		snprintf(row(v, ROW_EAGER)->status, sizeof(row(v, ROW_EAGER)->status), "not timed: %s", e.msg);
		return;
	}
	/* the candidate is done: its runner goes, and on a device the baseline's takes its arena over */
	if (r->cs_up)
		kg_session_close(&r->cs);
	struct kg_session_opts so = {
		.be = be,
		.so_path = module,
		.state_file = state,
		.limits = p->limits,
		.required_layers = p->required_layers,
		.disabled_layers = p->disabled_layers,
		.threads = 1,
		.call_timeout_s = 60,
		.unfiltered = 1,
		.jit_dir = be->needs_gpu ? jit : NULL,
		.jit_rw = 1,
	};
	if (be->needs_gpu) {
		if (!r->cs.keeper) {
			snprintf(row(v, ROW_EAGER)->status, sizeof(row(v, ROW_EAGER)->status),
				 "not timed: the candidate's device arena is not kgate-device's");
			return;
		}
		so.keeper = &r->keeper;
		so.take_slot = 1 + r->cs.dev_slot;
	}
	kg_run_progress(r, "timing the baselines");
	struct kg_session *bs = calloc(1, sizeof(*bs));
	if (!bs)
		return;
	rc = kg_session_start(bs, &so, &r->ca, &e);
	if (!rc)
		rc = kg_session_setup(bs, &e);
	if (rc) {
		char why[400];
		snprintf(why, sizeof(why), "%s", rc == KG_SESSION_FAILED ? bs->msg : rc < 0 ? e.msg : "its runner ended");
		snprintf(row(v, ROW_EAGER)->status, sizeof(row(v, ROW_EAGER)->status), "failed to start: %s", why);
	} else {
		char how[240], name[64], what[160];
		kg_torch_task_name(p->task.baseline_torch, name, sizeof(name));
		if (!strcmp(p->task.baseline_torch, p->task.ref[KG_BACKEND_TORCH]))
			snprintf(what, sizeof(what), "the module's Model");
		else
			snprintf(what, sizeof(what), "the Model of task %s's %s.py", p->task.name, name);
		const char *where = be->needs_gpu ? v->device : "the host";
		snprintf(how, sizeof(how), "%s eager, %s, on %s, %s", tv, what, where,
			 be->needs_gpu ? "kgate-device's span" : "the runner's clock");
		time_row(r, bs, ROW_EAGER, KG_ENTRY_FORWARD, how);
		if (compile_ok) {
			snprintf(how, sizeof(how), "%s torch.compile (default mode), %s, on %s, kgate-device's span", tv, what,
				 where);
			time_row(r, bs, ROW_COMPILE, KG_ENTRY_COMPILED, how);
		}
	}
	kg_session_free(bs);
	free(bs);
	pick_best(v);
}
