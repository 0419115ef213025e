/* The build phase: the trusted reference and the candidate compiled in their own compile
 * sandboxes, then the candidate's imports held against the policy's and its backend's lists
 * before anything of it runs. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verifier/compile/compile.h"
#include "verifier/compile/elfsyms.h"
#include "verifier/plan/resolve.h"
#include "verifier/judge/ends.h"
#include "verifier/phases/phases.h"
#include "verifier/run.h"
#include "verifier/plan/torchtask.h"

static int compile_one(struct kg_run *r, const struct kg_backend *be, const struct kg_ufile *src, const char *sub, char *so_out,
		       size_t so_sz, struct kg_compile_result *cr, const char *const *flags, int n_flags,
		       const char (*libs)[32], int n_libs, struct kg_cache *cache, kg_error *e)
{
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/%s", r->work, sub);
	if (mkdir(dir, 0755))
		return kg_err(e, -errno, "mkdir %s: %s", dir, strerror(errno));
	if (kg_sb_chown_scratch(dir, e))
		return e->code;
	struct kg_compile_opts co = {
		.be = be,
		.arch = r->gpu.arch[0] ? r->gpu.arch : NULL,
		.flags = flags,
		.n_flags = n_flags,
		.libs = libs,
		.n_libs = n_libs,
		.limits = r->plan->limits,
		.required_layers = r->plan->required_layers,
		.disabled_layers = r->plan->disabled_layers,
		.cache = cache,
	};
	co.limits.wall_s = be->compile_wall_s;
	co.limits.mem_bytes = 4ull << 30;
	co.limits.nproc = 64;
	int rc = kg_compile(src->data, src->len, dir, "kernel.so", &co, cr, e);
	snprintf(so_out, so_sz, "%s/kernel.so", dir);
	return rc;
}

/* The compile cache, unless --no-cache. A cache kgate cannot trust (not the user's, writable by
 * others) or cannot create is not used, and said once per process on stderr: the build goes on,
 * only slower, and a search's every candidate need not repeat it. */
static struct kg_cache *open_cache(const struct kg_plan *p)
{
	static int told;
	struct kg_cache *c = NULL;
	kg_error e = {0};
	/* A layer the policy requires but --no-layer refuses fails the compile sandbox as
	 * sandbox.setup; a hit would skip that sandbox and leave the failure to the runners, which
	 * name it only as an internal error. The run is lost either way: compile, and name it. */
	if (p->no_cache || (p->required_layers & p->disabled_layers))
		return NULL;
	int rc = kg_cache_open(NULL, &c, &e);
	if (rc && rc != -ECANCELED && !told++)
		fprintf(stderr, "kgate: compile cache not used: %s\n", e.msg);
	return c;
}

static void static_check(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	kg_buf syms = {0}, needed = {0};
	kg_error e = {0};
	uint64_t t0 = kg_now_ns();
	int bad = 0;
	if (kg_elf_imports(r->cand_so, &syms, &needed, &e)) {
		kg_run_internal(r, "reading the candidate's imports: %s", e.msg);
		goto out;
	}
	for (const char *s = syms.data; s && *s; s += strlen(s) + 1) {
		int be = kg_backend_symbol_verdict(p->be, s);
		/* a device backend's imports the policy's gpu section names (tensor maps, driver entry
		 * points) are its to allow, a refusal of the backend's included */
		int gpu = p->be->needs_gpu && kg_policy_gpu_symbol_allowed(&p->pol, s);
		if (be > 0 || gpu || (!be && kg_policy_symbol_allowed(&p->pol, s)))
			continue;
		bad++;
		struct kg_reason *x = kg_verdict_add_reason(
			r->v, KG_R_STATIC_FORBIDDEN_SYMBOL, "the candidate imports '%s', which the policy does not allow%s", s,
			be < 0 && !strncmp(s, "cudaGetDriverEntryPoint", 23)
				? " (the runtime's route to any driver function by name: gpu.driver_entry_points lifts it; the "
				  "driver's tensor-map encoders may be imported by name under gpu.tensor_maps)"
				: "");
		snprintf(x->tensor, sizeof(x->tensor), "%.31s", s);
	}
	for (const char *s = needed.data; s && *s; s += strlen(s) + 1) {
		if (kg_backend_library_allowed(p->be, s) || kg_policy_library_allowed(&p->pol, s))
			continue;
		bad++;
		kg_verdict_add_reason(r->v, KG_R_STATIC_FORBIDDEN_LIBRARY,
				      "the candidate links against '%s', which the policy does not allow", s);
	}
	kg_verdict_add_check(r->v, "static-imports", bad ? KG_CHECK_FAIL : KG_CHECK_PASS, kg_run_secs_since(t0),
			     bad ? "%d forbidden imports" : "every import is on the policy's allowlist", bad);
out:
	kg_buf_free(&syms);
	kg_buf_free(&needed);
}

/* A module task's state (torchtask.h), built on a thread of its own while the candidate compiles:
 * a sandboxed torch process of its own, which the candidate's build never waits on. */
struct state_job {
	char dir[PATH_MAX + 32];
	kg_buf spec;
	struct kg_torch_state st;
	const char *module;
	int rc;
	kg_error e;
	pthread_t th;
	int started;
};

static void *state_main(void *arg)
{
	struct state_job *j = arg;
	j->rc = kg_torch_state_build(j->module, j->dir, j->spec.data, &j->st, &j->e);
	return NULL;
}

static int state_start(struct kg_run *r, struct state_job *j)
{
	snprintf(j->dir, sizeof(j->dir), "%s/ref", r->work);
	j->module = r->ref_so;
	int rc = kg_torch_state_spec(r->plan, &j->spec, &j->e);
	if (!rc && !(rc = kg_buf_append(&j->spec, "", 1))) { /* a C string */
		if ((rc = -pthread_create(&j->th, NULL, state_main, j)))
			kg_err(&j->e, rc, "starting the state job's thread: %s", strerror(-rc));
		j->started = !rc;
	}
	return rc;
}

/* The state job's end: its file for both runners, the shapes the Model refuses dropped (the base
 * one is kgate's failure: not verified), the module report filled. 0 to go on. */
static int state_finish(struct kg_run *r, struct state_job *j)
{
	if (j->started)
		pthread_join(j->th, NULL);
	j->started = 0;
	kg_buf_free(&j->spec);
	struct kg_module_report *m = &r->v->module;
	if (j->rc) {
		kg_run_internal(r, "building the module's state for the run (the Model built at each shape): %s", j->e.msg);
		return -1;
	}
	const struct kg_torch_state *st = &j->st;
	snprintf(r->state_path, sizeof(r->state_path), "%s", st->path);
	m->present = 1;
	snprintf(m->mode, sizeof(m->mode), "%s", st->mode);
	snprintf(m->mode_from, sizeof(m->mode_from), "%s", st->mode_from);
	m->n_entries = st->n_entries;
	m->n_more = st->n_more;
	memcpy(m->entries, st->entries, sizeof(m->entries));
	for (int s = 0; s < r->plan->n_shapes && s < st->n_shapes; s++) {
		if (!st->refused[s])
			continue;
		if (s == 0) {
			kg_run_internal(r, "the Model refuses the base shape %s: %s", r->plan->shape_str[0], st->why[0]);
			return -1;
		}
		kg_run_drop_shape(r, s, st->why[s]);
	}
	if (st->n_shapes < r->plan->n_shapes) {
		kg_run_internal(r, "the module's state has %d shapes of the run's %d", st->n_shapes, r->plan->n_shapes);
		return -1;
	}
	return 0;
}

int kg_phase_build(struct kg_run *r)
{
	struct state_job *sj = NULL;
	const struct kg_plan *p = r->plan;
	struct kg_verdict *v = r->v;
	struct kg_compile_result *cr = calloc(1, sizeof(*cr));
	kg_error ce = {0};
	uint64_t t0 = kg_now_ns();
	int go_on = 0;
	if (!cr) {
		kg_run_internal(r, "out of memory");
		return 0;
	}
	kg_run_progress(r, "compiling");
	struct kg_cache *cache = open_cache(p);
	const char *ref_src = p->task.ref[p->ref_be->id];
	if (p->ref_be->runner_script) {
		/* an interpreted reference (a PyTorch module) runs as it was read: staged, not built; its
		 * state for the run (kept buffers, the constructor's arguments) built from that copy */
		if (kg_torch_stage_ref(r, &ce)) {
			kg_run_internal(r, "staging the reference %s: %s", ref_src, ce.msg);
			goto out;
		}
		if (!(sj = calloc(1, sizeof(*sj))) || state_start(r, sj)) {
			kg_run_internal(r, "starting the module's state job: %s", sj ? sj->e.msg : "out of memory");
			goto out;
		}
	} else if (compile_one(r, p->ref_be, &p->ref_src, "ref", r->ref_so, sizeof(r->ref_so), cr, NULL, 0,
			(const char(*)[32])p->task.ref_libs[p->ref_be->id], p->task.n_ref_libs[p->ref_be->id], cache, &ce) ||
	    !cr->ok) {
		/* the compiler quotes the source: its log is shown only for a reference file of the user's */
		if (ce.code == -EPERM)
			kg_verdict_add_reason(v, KG_R_SANDBOX_SETUP, "compile: %s", ce.msg);
		else
			kg_run_internal(r, "compiling the reference %s failed: %s", ref_src,
					ce.msg[0]	      ? ce.msg
					: p->ref_src.owned ? cr->log
							   : "(the compiler's log is not shown: the file is not yours)");
		goto out;
	}
	if (compile_one(r, p->be, &p->cand_src, "cand", r->cand_so, sizeof(r->cand_so), cr, p->flags, p->n_flags, NULL,
			0, cache, &ce)) {
		if (ce.code == -EPERM)
			kg_verdict_add_reason(v, KG_R_SANDBOX_SETUP, "compile: %s", ce.msg);
		else
			kg_run_internal(r, "compiling the candidate: %s", ce.msg);
		goto out;
	}
	v->t_compile_s = kg_run_secs_since(t0);
	snprintf(v->compile_log, sizeof(v->compile_log), "%s", cr->log);
	if (!cr->ok && p->be->id == KG_BACKEND_TORCH && cr->outcome.end == KG_SB_END_EXIT &&
	    cr->outcome.exit_code == KG_TORCH_BUILD_NO_TOOLCHAIN) {
		/* the builder's own word (its exit status: the candidate's code ran in a child of it):
		 * this host lacks a piece of load_inline's toolchain, which kgate names itself */
		char pieces[1024];
		int trc = kg_torch_toolchain(pieces, sizeof(pieces));
		kg_run_internal(r, "this host lacks what a ModelNew's build needs: %s (scripts/deps.sh installs it; "
				   "kgate doctor lists it)",
				trc > 0 ? pieces : trc ? pieces : "the builder found a piece missing (see the compile log)");
		snprintf(v->compile_log, sizeof(v->compile_log), "%s", cr->log);
		goto out;
	}
	if (!cr->ok) {
		char what[700];
		kg_end_describe(&cr->outcome, what, sizeof(what));
		if (cr->outcome.end == KG_SB_END_EXIT && !cr->outcome.exit_code)
			snprintf(what, sizeof(what), "the build exited 0 and left no regular file as its output");
		if (cr->outcome.end != KG_SB_END_EXIT)
			kg_verdict_add_reason(v, kg_end_reason(cr->outcome.end), "compile: %s", what);
		kg_verdict_add_reason(v, KG_R_COMPILE_ERROR, "the candidate does not compile (%s); see the compile log",
				      what);
		kg_verdict_add_check(v, "compile", KG_CHECK_FAIL, cr->seconds, "%s", what);
		goto out;
	}
	v->compile_cached = cr->cached;
	/* a reader must know the compiler did not run this time (kgate(1), "Compile cache") */
	if (cr->cached)
		kg_verdict_add_check(v, "compile", KG_CHECK_PASS, cr->seconds,
				     "cached: built before from the same source, command, compiler and headers (%s)",
				     cr->cache_note);
	else
		kg_verdict_add_check(v, "compile", KG_CHECK_PASS, cr->seconds, "built in %.2f s%s%s%s", cr->seconds,
				     cr->cache_note[0] ? " (" : "", cr->cache_note, cr->cache_note[0] ? ")" : "");
	if (p->be->runner_script) {
		/* an interpreted candidate's module, as kgate read it, in a directory of kgate's own: the
		 * build ran the module's code beside its copy there, which may now be anything */
		char dir[PATH_MAX + 32];
		snprintf(dir, sizeof(dir), "%s/module", r->work);
		snprintf(r->cand_module, sizeof(r->cand_module), "%s/kernel%s", dir, p->be->ext);
		if (mkdir(dir, 0755) || kg_write_file(r->cand_module, p->cand_src.data, p->cand_src.len, 0644, &ce)) {
			kg_run_internal(r, "staging the candidate's module: %s", ce.msg[0] ? ce.msg : strerror(errno));
			goto out;
		}
		/* its process holds the interpreter and torch, with every symbol they bring: its imports
		 * are no boundary, and nothing rests on them (the checks and the clock are the trusted
		 * side's) */
		kg_verdict_add_check(v, "static-imports", KG_CHECK_SKIP, 0,
				     "a Python candidate: its process holds the interpreter and torch, whose imports "
				     "no allowlist bounds; the verdict rests on the trusted side's checks and clock");
	} else {
		static_check(r);
	}
	go_on = kg_run_ok(r);
out:
	if (sj) {
		/* joined whatever happened to the candidate's build: its process ends with its thread */
		if (sj->started && state_finish(r, sj))
			go_on = 0;
		kg_buf_free(&sj->spec);
		free(sj);
	}
	kg_cache_close(cache);
	free(cr);
	return go_on;
}
