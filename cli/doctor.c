/* `kgate doctor`: what this host gives kgate. Which sandbox layers come up (by spawning a real
 * sandboxed /bin/true in the compile sandbox and in each backend's run sandbox), where the runner,
 * headers and each backend's compiler are, and the GPU. Operators run it after installing;
 * `kgate doctor --gpu` exits 0 only when a GPU is usable. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/doctor.h"
#include "sandbox/sandbox.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/gpu.h"
#include "verifier/plan/resolve.h"

/* Spawns /bin/true under spec (its profile, name and data) and says which layers came up. */
static void probe_sandbox(struct kg_sb_spec spec)
{
	static const char *const argv[] = {"/bin/true", NULL};
	spec.argv = argv;
	spec.limits = (struct kg_sb_limits){.wall_s = 10};
	spec.stdin_fd = -1;
	const char *name = spec.name ? spec.name : kg_sb_profile_name(spec.profile);
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	char on[256], off[256];
	if (kg_sb_spawn(&spec, &c, &e)) {
		printf("  %-9s cannot start: %s\n", name, e.msg);
		return;
	}
	struct kg_sb_outcome o;
	kg_sb_wait(c, &o);
	kg_sb_layers_str(o.layers_active, on, sizeof(on));
	kg_sb_layers_str(o.layers_failed, off, sizeof(off));
	printf("  %-9s %s: active %s%s%s\n", name, o.end == KG_SB_END_EXIT && o.exit_code == 0 ? "ok" : "FAILED", on,
	       off[0] ? "; unavailable " : "", off);
	kg_sb_free(c);
}

/* The run sandbox a backend's runner gets, as the verifier builds it (verifier/session/session.c). */
static void probe_run_sandbox(const struct kg_backend *be)
{
	probe_sandbox((struct kg_sb_spec){
		.profile = KG_SB_PROFILE_RUN,
		.name = be->sandbox_name,
		.devices = be->devices,
		.proc = be->proc,
		.sys_ro = be->sys_ro,
		.syscalls = be->syscalls,
		.readonly_opens = be->readonly_opens,
	});
}

/* The compiler a backend's build would run: argv[0] of the command its table entry builds (for
 * cuda, nvcc under kg_cuda_home()), so doctor names exactly what kgate verify uses. */
static void compiler_line(const struct kg_backend *be)
{
	struct kg_compile_cmd *cmd = calloc(1, sizeof(*cmd));
	const struct kg_compile_req req = {
		.src_inside = "/work/kernel",
		.out_inside = "/work/kernel.so",
		.include_inside = "/kgate/include",
	};
	kg_error e = {0};
	if (be->runner_script) {
		/* an interpreted reference runner: the Python that has torch, found once */
		char py[PATH_MAX], ver[160];
		if (kg_path_python(py, sizeof(py), ver, sizeof(ver))) {
			printf("  %-9s %s: %s (PyTorch module tasks cannot run)\n", "python", be->name, ver);
		} else {
			printf("  %-9s %s: %s, %s\n", "python", be->name, py, ver);
			/* what a ModelNew's load_inline extensions are built with (runner/torch_build.py) */
			char pieces[1024];
			int trc = kg_torch_toolchain(pieces, sizeof(pieces));
			printf("  %-9s %s: %s%s\n", "load_inline", be->name, pieces,
			       trc ? " (ModelNew candidates with C++ extensions cannot be built; scripts/deps.sh installs "
				     "them)"
				   : "");
		}
		free(cmd);
		return;
	}
	if (!cmd || be->compile_cmd(cmd, &req, &e) || !cmd->argc)
		printf("  %-9s %s: unknown (%s)\n", "compiler", be->name, cmd ? e.msg : "out of memory");
	else if (access(cmd->argv[0], X_OK))
		printf("  %-9s %s: not found: %s (%s candidates cannot be built)\n", "compiler", be->name, cmd->argv[0],
		       be->name);
	else
		printf("  %-9s %s: %s\n", "compiler", be->name, cmd->argv[0]);
	free(cmd);
}

static void doctor_usage(FILE *f)
{
	fprintf(f, "usage: kgate doctor [--gpu]\n"
		   "  what this host gives kgate: runner, headers, compilers, GPU, sandbox layers\n"
		   "  --gpu   only the GPU: exit 0 when one is usable, 1 when not\n");
}

int kg_cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {{"gpu", no_argument, 0, 'g'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
	int gpu_only = 0, ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch == 'g') {
			gpu_only = 1;
			continue;
		}
		doctor_usage(ch == 'h' ? stdout : stderr);
		return ch == 'h' ? 0 : 2;
	}
	if (optind < argc) {
		fprintf(stderr, "kgate doctor: unexpected argument '%s'\n", argv[optind]);
		doctor_usage(stderr);
		return 2;
	}
	struct kg_gpu_info g;
	kg_gpu_probe(&g);
	if (gpu_only) {
		if (g.present)
			printf("%s (sm_%s, %d SMs, %.1f GiB)\n", g.name, g.arch, g.sm_count, (double)g.mem_bytes / (1 << 30));
		else
			printf("no GPU: %s\n", g.why);
		return g.present ? 0 : 1;
	}
	char path[PATH_MAX];
	printf("kgate doctor\n");
	printf("  runner    %s\n", kg_path_runner(path, sizeof(path)) ? "NOT FOUND" : path);
	printf("  headers   %s\n", kg_path_include(path, sizeof(path)) ? "NOT FOUND" : path);
	for (int i = 0; i < KG_BACKEND_COUNT_; i++)
		compiler_line(kg_backend_get((enum kg_backend_id)i));
	if (g.present)
		printf("  gpu       %s (sm_%s, %d SMs, %.1f GiB)\n", g.name, g.arch, g.sm_count,
		       (double)g.mem_bytes / (1 << 30));
	else
		printf("  gpu       none: %s\n", g.why);
	/* where a module task's torch runs: on the GPU where there is one and the torch has CUDA */
	char py[PATH_MAX], ver[160], where[200];
	struct kg_gpu_info tg;
	if (!kg_path_python(py, sizeof(py), ver, sizeof(ver)))
		printf("  torch     %s: %s\n", kg_torch_placement(ver, &tg, where, sizeof(where)) ? "on the GPU" : "on the host",
		       where);
	printf("sandbox layers (compile, and each backend's run sandbox):\n");
	probe_sandbox((struct kg_sb_spec){.profile = KG_SB_PROFILE_COMPILE});
	/* A GPU backend's sandbox binds the driver's device nodes: only meaningful with a GPU. */
	for (int i = 0; i < KG_BACKEND_COUNT_; i++) {
		const struct kg_backend *be = kg_backend_get((enum kg_backend_id)i);
		if (!be->needs_gpu || g.present)
			probe_run_sandbox(be);
	}
	return 0;
}
