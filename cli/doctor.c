/* `kgate doctor`: what this host gives kgate. Which sandbox layers come up (by spawning a real
 * sandboxed /bin/true per profile), where the runner, headers and toolchains are, and the GPU.
 * Operators run it after installing; `kgate doctor --gpu` exits 0 only when a GPU is usable. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/doctor.h"
#include "sandbox/sandbox.h"
#include "verifier/gpu.h"
#include "verifier/session.h"

static void probe_profile(enum kg_sb_profile p)
{
	static const char *const argv[] = {"/bin/true", NULL};
	struct kg_sb_spec spec = {
		.profile = p,
		.argv = argv,
		.limits = {.wall_s = 10},
		.stdin_fd = -1,
	};
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	char on[256], off[256];
	if (kg_sb_spawn(&spec, &c, &e)) {
		printf("  %-9s cannot start: %s\n", kg_sb_profile_name(p), e.msg);
		return;
	}
	struct kg_sb_outcome o;
	kg_sb_wait(c, &o);
	kg_sb_layers_str(o.layers_active, on, sizeof(on));
	kg_sb_layers_str(o.layers_failed, off, sizeof(off));
	printf("  %-9s %s: active %s%s%s\n", kg_sb_profile_name(p),
	       o.end == KG_SB_END_EXIT && o.exit_code == 0 ? "ok" : "FAILED", on, off[0] ? "; unavailable " : "", off);
	kg_sb_free(c);
}

int kg_cmd_doctor(int argc, char **argv)
{
	int gpu_only = argc > 1 && !strcmp(argv[1], "--gpu");
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
	printf("  cc        %s\n", access("/usr/bin/cc", X_OK) ? "NOT FOUND" : "/usr/bin/cc");
	const char *ch = getenv("CUDA_HOME");
	snprintf(path, sizeof(path), "%s/bin/nvcc", ch && *ch ? ch : "/usr/local/cuda");
	printf("  nvcc      %s\n", access(path, X_OK) ? "not found (CUDA candidates cannot be built)" : path);
	if (g.present)
		printf("  gpu       %s (sm_%s, %d SMs, %.1f GiB)\n", g.name, g.arch, g.sm_count,
		       (double)g.mem_bytes / (1 << 30));
	else
		printf("  gpu       none: %s\n", g.why);
	printf("sandbox layers per profile:\n");
	probe_profile(KG_SB_PROFILE_COMPILE);
	probe_profile(KG_SB_PROFILE_RUN_CPU);
	if (g.present)
		probe_profile(KG_SB_PROFILE_RUN_CUDA);
	return 0;
}
