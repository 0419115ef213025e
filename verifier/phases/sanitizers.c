/* The compute-sanitizer phase: after a GPU candidate passed every checked run and the timing, one
 * run per tool the policy lists, on every shape of the set, with exact per-tensor allocations so
 * that the tool sees each buffer's true end (the checked runs' guard bands sit inside one
 * allocation, where a read past a tensor is invisible to it). The tool's exit status decides; its
 * report, behind a prefix the candidate cannot predict, supplies the details. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/judge/ends.h"
#include "verifier/plan/prng.h"
#include "verifier/phases/phases.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"
#include "verifier/session/compute_sanitizer.h"

#define SEED_SANITIZER 0x73616e0000ull

static void sanitized_run(struct kg_run *r, enum kg_sanitizer_tool tool)
{
	const struct kg_plan *p = r->plan;
	uint64_t t0 = kg_now_ns();
	const char *name = kg_sanitizer_tool_name(tool);
	enum kg_reason_code code = kg_sanitizer_tool_reason(tool);
	char prefix[48], msg[900], what[700];
	uint64_t token = 0;
	kg_seed_fresh(&token);
	snprintf(prefix, sizeof(prefix), "=kgate-%016llx=", (unsigned long long)token);
	const char *argv[KG_SANITIZER_MAX_ARGS];
	kg_sanitizer_argv(tool, r->sanitizer, prefix, argv);
	struct kg_session ss;
	kg_error e = {0};
	struct kg_session_opts so = {
		.be = p->be,
		.so_path = r->cand_so,
		.limits = p->limits,
		.required_layers = p->required_layers,
		.disabled_layers = p->disabled_layers,
		.threads = p->pol.threads,
		.call_timeout_s = 120,
		.tool_argv = argv,
	};
	/* the tool's own descriptors and a report that must survive the candidate's chatter */
	so.limits.nofile = 1024;
	so.limits.output_keep = 1u << 20;
	so.limits.wall_s = p->limits.wall_s > 600 ? p->limits.wall_s : 600;
	so.limits.cpu_s = 0;
	kg_run_progress(r, "%s run", name);
	int rc = kg_session_start(&ss, &so, &r->ca, &e);
	int completed = 0, shape = 0;
	const char *during = "while loading";
	for (; !rc && shape < p->n_shapes; shape++) {
		struct kg_call_result res;
		if (r->dropped[shape]) /* the Model refuses it: no trial ran there either */
			continue;
		if ((rc = kg_run_layout(r, shape, &r->ca, &e)) || (rc = kg_session_setup(&ss, &e)))
			break;
		uint64_t seed = kg_seed_derive(p->master_seed, SEED_SANITIZER + (uint64_t)tool * 64 + (uint64_t)shape);
		kg_trial_gen_inputs(r, KG_CLASS_NORMAL, seed);
		kg_trial_cand_arena(r, seed);
		kg_trial_load_inputs_from(r, &r->ca, r->shadow); /* the call exposes nothing itself */
		during = "during kg_forward";
		if ((rc = kg_session_run_call(&ss, &(struct kg_call){0}, &res, &e)))
			break;
	}
	if (!rc)
		completed = 1;
	char at[160] = "";
	if (shape < p->n_shapes)
		snprintf(at, sizeof(at), " at shape %s", p->shape_str[shape]);
	char fail_msg[sizeof(ss.msg)];
	snprintf(fail_msg, sizeof(fail_msg), "%s", rc == KG_SESSION_FAILED ? ss.msg : e.msg);
	kg_session_close(&ss);
	const struct kg_sb_outcome *o = &ss.outcome;
	double secs = kg_run_secs_since(t0);
	const char *log = getenv("KGATE_TOOL_LOG"); /* development aid: the tool's whole output */
	FILE *lf = log && *log && o->output ? fopen(log, "a") : NULL;
	if (lf) {
		fprintf(lf, "--- %s on %s (end %d, exit %d)\n%s\n", name, p->candidate, o->end, o->exit_code, o->output);
		fclose(lf);
	}
	kg_end_describe(o, what, sizeof(what));
	if (o->end == KG_SB_END_EXIT && o->exit_code == KG_SANITIZER_ERROR_EXIT) {
		kg_sanitizer_first_error(o->output, prefix, msg, sizeof(msg));
		kg_verdict_add_reason(r->v, code, "compute-sanitizer %s found errors%s: %s", name, at, msg);
		kg_verdict_add_check(r->v, name, KG_CHECK_FAIL, secs, "errors%s: %s", at, msg);
	} else if (completed && o->end == KG_SB_END_EXIT && o->exit_code == 0) {
		kg_verdict_add_check(r->v, name, KG_CHECK_PASS, secs, "compute-sanitizer %s: no errors over %d shapes", name,
				     p->n_shapes);
	} else if (rc == KG_SESSION_ENDED && o->end != KG_SB_END_EXIT && o->end != KG_SB_END_KILLED &&
		   o->end != KG_SB_END_TIMEOUT) {
		/* The sandbox ended it (a denied call, memory, a crash): the candidate's process did it.
		 * Running out of time is left to the branch below: the tool slows every kernel by a
		 * large factor, and a candidate that passed its timed runs is not judged by that. */
		kg_verdict_add_reason(r->v, kg_end_reason(o->end), "candidate %s under compute-sanitizer %s%s: %s", during,
				      name, at, what);
		kg_verdict_add_check(r->v, name, KG_CHECK_FAIL, secs, "%s", what);
	} else {
		/* The tool itself failed (no device support, a lost connection, too slow at these
		 * shapes): kgate cannot say, and says so (exit 3, never an acceptance). */
		const char *out = o->output ? o->output : "";
		size_t n = strlen(out);
		kg_run_internal(r, "the compute-sanitizer %s run failed%s (%s; %s%s): %.300s", name, at, what,
				completed ? "" : "runner: ", completed ? "the runs completed" : fail_msg,
				n > 300 ? out + n - 300 : out);
	}
	kg_session_free(&ss);
}

void kg_phase_sanitizers(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	if (!p->pol.compute_sanitizer)
		return;
	if (!p->be->needs_gpu) {
		kg_verdict_add_check(r->v, "compute-sanitizer", KG_CHECK_SKIP, 0,
				     "the policy's compute-sanitizer runs apply to GPU candidates only");
		return;
	}
	if (p->be->runner_script) {
		/* the tool's exact buffers are kgate-run's; a Python runner hosts the interpreter and torch */
		kg_verdict_add_check(r->v, "compute-sanitizer", KG_CHECK_SKIP, 0,
				     "compute-sanitizer runs are kgate-run's: not run for a PyTorch module candidate");
		return;
	}
	if (!kg_run_ok(r))
		return;
	/* The checked sessions are done; their processes go first, so the GPU and the arena are the
	 * sanitized run's alone. */
	if (r->cs_up)
		kg_session_close(&r->cs);
	if (r->rs_up)
		kg_session_close(&r->rs);
	for (int t = 0; t < KG_SAN_COUNT_ && kg_run_ok(r); t++)
		if (p->pol.compute_sanitizer >> t & 1)
			sanitized_run(r, (enum kg_sanitizer_tool)t);
}
