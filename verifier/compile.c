/* Compiler invocation in the sandbox. The source is copied into a fresh scratch directory so the
 * compiler's only writable place holds nothing but the candidate. */
#include "verifier/compile.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verifier/session.h"

#define KG_SOURCE_MAX (4u << 20)

int kg_compile(const char *src, const char *workdir, const char *out_name, const struct kg_compile_opts *o,
	       struct kg_compile_result *r, kg_error *e)
{
	char *text = NULL, inc[PATH_MAX], dst[PATH_MAX], out_inside[PATH_MAX], cc_path[PATH_MAX];
	char cuda_home[PATH_MAX], nvcc_path[PATH_MAX + 16], gencode[64], rpath[PATH_MAX + 32], libargs[4][40];
	size_t len = 0;
	struct kg_sb_child *c = NULL;
	int is_cuda = o->lang && !strcmp(o->lang, "cuda");
	memset(r, 0, sizeof(*r));
	int rc = kg_read_file(src, KG_SOURCE_MAX, &text, &len, e);
	if (rc)
		return rc;
	if (kg_path_include(inc, sizeof(inc))) {
		rc = kg_err(e, -ENOENT, "kgate headers not found (kgate/kernel.h)");
		goto out;
	}
	snprintf(dst, sizeof(dst), "%s/%s", workdir, is_cuda ? "kernel.cu" : "kernel.c");
	if ((rc = kg_write_file(dst, text, len, 0644, e)))
		goto out;
	snprintf(out_inside, sizeof(out_inside), "/work/%s", out_name);

	const char *argv[96];
	int ac = 0;
	if (is_cuda) {
		const char *ch = o->cuda_home ? o->cuda_home : getenv("CUDA_HOME");
		/* Resolved: /usr/local/cuda is usually a symlink, and a symlink cannot be a mount point. */
		char *real = realpath(ch && *ch ? ch : "/usr/local/cuda", NULL);
		snprintf(cuda_home, sizeof(cuda_home), "%s", real ? real : ch && *ch ? ch : "/usr/local/cuda");
		free(real);
		snprintf(nvcc_path, sizeof(nvcc_path), "%s/bin/nvcc", cuda_home);
		const char *arch = o->arch ? o->arch : "90a";
		snprintf(gencode, sizeof(gencode), "-gencode=arch=compute_%s,code=sm_%s", arch, arch);
		argv[ac++] = nvcc_path;
		argv[ac++] = "-O3";
		argv[ac++] = gencode;
		argv[ac++] = "-shared";
		argv[ac++] = "-Xcompiler";
		argv[ac++] = "-fPIC";
		/* The shared runtime: the runner initialises it before the filter, and the candidate's
		 * imports stay a short list of cuda* symbols instead of cudart_static's dlopen and
		 * pthread internals. */
		argv[ac++] = "-cudart";
		argv[ac++] = "shared";
		snprintf(rpath, sizeof(rpath), "-Xlinker=-rpath,%s/lib64", cuda_home);
		argv[ac++] = rpath;
		argv[ac++] = "-I/kgate/include";
		argv[ac++] = "-o";
		argv[ac++] = out_inside;
		argv[ac++] = "/work/kernel.cu";
	} else {
		/* cc is an alternatives symlink; resolve it here so the sandbox needs no /etc/alternatives. */
		char *real = realpath("/usr/bin/cc", NULL);
		snprintf(cc_path, sizeof(cc_path), "%s", real ? real : "/usr/bin/cc");
		free(real);
		argv[ac++] = cc_path;
		argv[ac++] = "-std=gnu11";
		argv[ac++] = "-O2";
		argv[ac++] = "-fPIC";
		argv[ac++] = "-shared";
		argv[ac++] = "-Wall";
		argv[ac++] = "-I/kgate/include";
		argv[ac++] = "-o";
		argv[ac++] = out_inside;
		argv[ac++] = "/work/kernel.c";
	}
	for (int i = 0; i < o->n_flags && ac < 90; i++)
		argv[ac++] = o->flags[i];
	for (int i = 0; i < o->n_libs && i < 4; i++) {
		snprintf(libargs[i], sizeof(libargs[i]), "-l%s", o->libs[i]);
		argv[ac++] = libargs[i];
	}
	if (!is_cuda)
		argv[ac++] = "-lm";
	argv[ac] = NULL;

	static const char *const envp_c[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/work", "TMPDIR=/tmp", NULL};
	char env_path[PATH_MAX + 64];
	snprintf(env_path, sizeof(env_path), "PATH=%s/bin:/usr/bin:/bin", is_cuda ? cuda_home : "/usr");
	const char *envp_cu[] = {env_path, "LANG=C", "HOME=/work", "TMPDIR=/tmp", NULL};
	struct kg_sb_path paths[3] = {
		{.host = workdir, .inside = "/work", .flags = KG_SB_PATH_RW},
		{.host = inc, .inside = "/kgate/include", .flags = 0},
		{.host = cuda_home, .inside = NULL, .flags = KG_SB_PATH_EXEC | KG_SB_PATH_OPTIONAL},
	};
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_COMPILE,
		.argv = argv,
		.envp = is_cuda ? envp_cu : envp_c,
		.cwd = "/work",
		.paths = paths,
		/* A toolkit under /usr is already visible through the profile's /usr. */
		.n_paths = is_cuda && strncmp(cuda_home, "/usr/", 5) ? 3 : 2,
		.limits = o->limits,
		.required = o->required_layers,
		.disabled = o->disabled_layers,
		.stdin_fd = -1,
	};
	uint64_t t0 = kg_now_ns();
	if ((rc = kg_sb_spawn(&spec, &c, e)))
		goto out;
	kg_sb_wait(c, &r->outcome);
	r->seconds = (double)(kg_now_ns() - t0) / 1e9;
	snprintf(r->log, sizeof(r->log), "%s", r->outcome.output ? r->outcome.output : "");
	r->outcome.output = NULL; /* owned by c, freed below; the log holds the copy */
	char so_host[PATH_MAX + 64];
	struct stat st;
	snprintf(so_host, sizeof(so_host), "%s/%s", workdir, out_name);
	r->ok = r->outcome.end == KG_SB_END_EXIT && r->outcome.exit_code == 0 && !stat(so_host, &st) &&
		S_ISREG(st.st_mode);
out:
	kg_sb_free(c);
	free(text);
	return rc;
}
