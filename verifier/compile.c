/* Compiler invocation in the sandbox. The source, as the trusted side read it from the one fd it
 * opened (plan.c), is written into a fresh scratch directory, so the compiler's only writable place
 * holds nothing but that text and no path of the user's is ever handed to it; the backend builds
 * the command. */
#include "verifier/compile.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verifier/resolve.h"

int kg_compile(const char *text, size_t len, const char *workdir, const char *out_name,
	       const struct kg_compile_opts *o, struct kg_compile_result *r, kg_error *e)
{
	char inc[PATH_MAX], dst[PATH_MAX], src_inside[64], out_inside[PATH_MAX];
	struct kg_sb_child *c = NULL;
	struct kg_compile_cmd *cmd = calloc(1, sizeof(*cmd));
	int rc = 0;
	memset(r, 0, sizeof(*r));
	if (!cmd)
		return kg_err(e, -ENOMEM, "out of memory");
	if (kg_path_include(inc, sizeof(inc))) {
		rc = kg_err(e, -ENOENT, "kgate headers not found (kgate/kernel.h)");
		goto out;
	}
	snprintf(dst, sizeof(dst), "%s/kernel%s", workdir, o->be->ext);
	if ((rc = kg_write_file(dst, text, len, 0644, e)))
		goto out;
	snprintf(src_inside, sizeof(src_inside), "/work/kernel%s", o->be->ext);
	snprintf(out_inside, sizeof(out_inside), "/work/%s", out_name);
	struct kg_compile_req req = {
		.src_inside = src_inside,
		.out_inside = out_inside,
		.include_inside = "/kgate/include",
		.arch = o->arch,
		.flags = o->flags,
		.n_flags = o->n_flags,
		.libs = o->libs,
		.n_libs = o->n_libs,
	};
	if ((rc = o->be->compile_cmd(cmd, &req, e)))
		goto out;
	struct kg_sb_path paths[4] = {
		{.host = workdir, .inside = "/work", .flags = KG_SB_PATH_RW},
		{.host = inc, .inside = "/kgate/include", .flags = 0},
	};
	int n_paths = 2;
	for (int i = 0; i < cmd->n_paths; i++)
		paths[n_paths++] = cmd->paths[i];
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_COMPILE,
		.argv = cmd->argv,
		.envp = cmd->envp,
		.cwd = "/work",
		.paths = paths,
		.n_paths = n_paths,
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
	free(cmd);
	return rc;
}
