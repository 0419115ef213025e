/* A JIT candidate's warm-up (a ModelNew with Triton kernels, or torch.compile inside it) on a GPU:
 * its kernels are compiled and autotuned ahead of every checked and timed call, in a sandboxed
 * process of their own, into a directory kgate made for this run; the candidate's run process then
 * finds each of them there and compiles nothing (its filter lets it start no process, and the
 * directory is read-only to it).
 *
 * The warm-up process runs the candidate's forward once at every planned shape, built from the
 * run's state file as the run's process builds it (the problem module never enters it), on tensors
 * of its own (the state file's dtypes and shapes, drawn by torch: nothing of the run's key), with the
 * GPU and without the run filter: Triton runs ptxas and the C compiler (its launcher) in processes
 * of their own and writes its cache. What it may do the candidate's code may then do too, for a
 * bounded time, before any checked call: start processes (only what the sandbox shows: /usr, the
 * interpreter's prefix, the toolkit), write the run's cache directory (and its private /tmp), use
 * the device. What that gains it: the list of planned shapes a little earlier than their calls
 * would show it (no input, key or clock), and a place to leave files for its own run process,
 * which could have made them itself; nothing it writes is read by kgate or by another run, the
 * whole sandbox is gone (pid namespace, watchdog) before the run's first call, and the directory
 * goes with the run's work directory. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "verifier/plan/resolve.h"
#include "verifier/phases/warmup.h"
#include "verifier/run.h"

/* A module that compiles kernels at run time: Triton, or torch.compile inside it. Only a way to
 * spare other modules the warm-up's process (a few seconds); one that compiles without either word
 * finds no process to start and fails its own run. */
int kg_warmup_needed(const char *src, size_t len)
{
	static const char *const words[] = {"triton", "torch.compile", "torch._inductor"};
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (memmem(src, len, words[i], strlen(words[i])))
			return 1;
	return 0;
}

int kg_warmup_torch(const struct kg_session_opts *o, const char *shapes, const char *jit_dir, double wall_s,
		    char *log, size_t logsz, kg_error *e)
{
	char py[PATH_MAX], why[160], script[PATH_MAX], helper[PATH_MAX], prefix[PATH_MAX], cvd[160];
	log[0] = '\0';
	if (!o->state_file)
		return kg_err(e, -EINVAL, "the JIT warm-up needs the run's state file");
	if (kg_path_python(py, sizeof(py), why, sizeof(why)))
		return kg_err(e, -ENOENT, "%s", why);
	if (kg_path_runner_script(o->be->runner_script, script, sizeof(script)) ||
	    kg_path_runner_script("torch_device.py", helper, sizeof(helper)))
		return kg_err(e, -ENOENT, "torch_runner.py or torch_device.py not found beside kgate-run");
	const char *argv[] = {py, "-I", "-B", script, "--backend", o->be->name, "--candidate", "--warmup", shapes, NULL};
	const char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp", "USER=kgate", "OMP_NUM_THREADS=1",
			      "TRITON_CACHE_DIR=/kgate/jit/triton", "TRITON_CACHE_AUTOTUNING=1",
			      "TORCHINDUCTOR_CACHE_DIR=/kgate/jit/inductor", "TORCHINDUCTOR_COMPILE_THREADS=1",
			      "PYTHONUNBUFFERED=1", NULL, NULL};
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	if (vis && strlen(vis) < 120) {
		snprintf(cvd, sizeof(cvd), "CUDA_VISIBLE_DEVICES=%s", vis);
		envp[11] = cvd;
	}
	struct kg_sb_path paths[10] = {
		{.host = o->state_file, .inside = "/kgate/lib/state"},
		{.host = o->cand_module, .inside = "/kgate/cand/kernel.py"},
		{.host = o->so_path, .inside = "/kgate/cand/kernel.so", .flags = KG_SB_PATH_EXEC},
		{.host = jit_dir, .inside = "/kgate/jit", .flags = KG_SB_PATH_RW | KG_SB_PATH_EXEC},
		{.host = helper, .inside = NULL},
	};
	int n_paths = 5;
	kg_python_sandbox_paths(py, script, prefix, sizeof(prefix), paths, &n_paths);
	char home[PATH_MAX];
	kg_cuda_home(home, sizeof(home));
	if (strncmp(home, "/usr/", 5))
		paths[n_paths++] = (struct kg_sb_path){.host = home, .flags = KG_SB_PATH_EXEC | KG_SB_PATH_OPTIONAL};
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_RUN,
		.name = "warmup-torch-cuda",
		.argv = argv,
		.envp = envp,
		.cwd = "/tmp",
		.paths = paths,
		.n_paths = n_paths,
		.limits = o->limits,
		.required = o->required_layers,
		.disabled = o->disabled_layers,
		.stdin_fd = -1,
		.devices = o->be->devices,
		.proc = o->be->proc,
		.sys_ro = o->be->sys_ro,
		.syscalls = o->be->syscalls,
		/* the sandbox's deny list alone: the program never applies the run profile */
		.seccomp_deferred = 1,
		.allow_threads = 1,
	};
	spec.limits.wall_s = wall_s;
	spec.limits.cpu_s = 0;
	spec.limits.nofile = 256; /* the compilers' and the driver's files at once */
	spec.limits.nproc = 256;
	spec.limits.address_space_unbounded = 1;
	struct kg_sb_child *c = NULL;
	int rc = kg_sb_spawn(&spec, &c, e);
	if (rc)
		return rc;
	struct kg_sb_outcome out;
	kg_sb_wait(c, &out);
	snprintf(log, logsz, "%s", out.output ? out.output : "");
	if (out.end == KG_SB_END_EXIT && out.exit_code == 0)
		rc = 0;
	else if (out.end == KG_SB_END_EXIT)
		rc = 1;
	else
		rc = kg_err(e, 1, "its process ended: %s%s%s", kg_sb_end_name(out.end), out.detail[0] ? ": " : "",
			    out.detail);
	kg_sb_free(c);
	return rc;
}

int kg_warmup_run(struct kg_run *r, const struct kg_session_opts *o, char *jit, size_t jitsz)
{
	const struct kg_plan *p = r->plan;
	kg_error e = {0};
	char shapes[KG_PLAN_MAX_SHAPES * 130] = "", log[4096];
	size_t n = 0;
	for (int s = 0; s < p->n_shapes && n < sizeof(shapes); s++)
		n += (size_t)snprintf(shapes + n, sizeof(shapes) - n, "%s%s", s ? ";" : "", p->shape_str[s]);
	snprintf(jit, jitsz, "%s/jit", r->work);
	int rc = mkdir(jit, 0755) && errno != EEXIST ? kg_err(&e, -errno, "mkdir %s: %s", jit, strerror(errno)) : 0;
	if (!rc)
		rc = kg_sb_chown_scratch(jit, &e);
	if (rc) {
		kg_run_internal(r, "the JIT warm-up's directory: %s", e.msg);
		return -1;
	}
	kg_run_progress(r, "compiling the candidate's JIT kernels at %d shapes", p->n_shapes);
	uint64_t t0 = kg_now_ns();
	double wall = p->pol.wall_s > 600 ? p->pol.wall_s : 600;
	rc = kg_warmup_torch(o, shapes, jit, wall, log, sizeof(log), &e);
	if (rc < 0) {
		kg_run_internal(r, "starting the JIT warm-up: %s", e.msg);
		return -1;
	}
	if (rc) {
		/* the candidate's own kernels did not compile or run at a planned shape: its build failed */
		kg_verdict_add_reason(r->v, KG_R_COMPILE_ERROR,
				      "its JIT kernels (Triton, torch.compile) failed in the warm-up ahead of the run, at "
				      "one of %d planned shapes: %s",
				      p->n_shapes, e.msg[0] ? e.msg : "see the compile log");
		size_t l = strlen(r->v->compile_log);
		snprintf(r->v->compile_log + l, sizeof(r->v->compile_log) - l, "%s-- JIT warm-up --\n%s", l ? "\n" : "", log);
		r->cand_dead = 1;
		return -1;
	}
	kg_verdict_add_check(r->v, "jit-warmup", KG_CHECK_PASS, kg_run_secs_since(t0),
			     "the candidate's JIT kernels compiled ahead of the run at %d shapes, into the run's cache",
			     p->n_shapes);
	return 0;
}
