/* Compiler invocation in the sandbox. The source, as the trusted side read it from the one fd it
 * opened (plan.c), is written into a fresh scratch directory, so the compiler's only writable place
 * holds nothing but that text and no path of the user's is ever handed to it; the backend builds
 * the command. The compile cache sits in front: same key, same .so and log, no compiler.
 *
 * Failed builds are not cached, on purpose: a compiler that exits non-zero may have met this
 * host's state rather than the source's (cc1 killed at the sandbox's memory or time bound reports
 * an error and exit 1 or 4 like a syntax error; a full scratch disk; a toolchain file the sandbox
 * could not see), and pinning such a verdict would reject a correct candidate on every later run.
 * A failing compile also costs little (the compiler stops at the first error), and a search
 * already verifies an identical source only once (agents/search.c). */
#include "verifier/compile/compile.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kg_sha256.h"
#include "verifier/plan/resolve.h"

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
	char so_host[PATH_MAX + 64];
	snprintf(so_host, sizeof(so_host), "%s/%s", workdir, out_name);
	uint8_t key[32];
	int have_key = 0;
	uint64_t t0 = kg_now_ns();
	if (o->cache) {
		const char *mounts[KG_ARRAY_LEN(cmd->paths) + 1] = {0};
		for (int i = 0; i < cmd->n_paths; i++)
			mounts[i] = cmd->paths[i].host;
		struct kg_cache_key_in ki = {
			.backend = o->be->name,
			.arch = o->arch,
			.argv = cmd->argv,
			.envp = cmd->envp,
			.mounts = mounts,
			.include_dir = inc,
			.script = cmd->script,
			.tool_version = cmd->tool_version,
			.src = text,
			.src_len = len,
		};
		kg_error ke = {0};
		int hit = 0;
		if (kg_cache_key(&ki, key, &ke))
			snprintf(r->cache_note, sizeof(r->cache_note), "not cached: %s", ke.msg);
		else if (have_key = 1, (hit = kg_cache_get(o->cache, key, so_host, r->log, sizeof(r->log), r->cache_note,
						    sizeof(r->cache_note), &ke)) < 0)
			snprintf(r->cache_note, sizeof(r->cache_note), "cache hit not usable: %s", ke.msg);
		if (hit == 1) {
			char hex[65];
			kg_sha256_tohex(key, hex);
			snprintf(r->cache_note, sizeof(r->cache_note), "entry %.16s", hex);
			r->ok = r->cached = 1;
			r->outcome.end = KG_SB_END_EXIT;
			r->seconds = (double)(kg_now_ns() - t0) / 1e9;
			goto out;
		}
	}
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
		.syscalls = cmd->syscalls,
	};
	t0 = kg_now_ns();
	if ((rc = kg_sb_spawn(&spec, &c, e)))
		goto out;
	kg_sb_wait(c, &r->outcome);
	r->seconds = (double)(kg_now_ns() - t0) / 1e9;
	snprintf(r->log, sizeof(r->log), "%s", r->outcome.output ? r->outcome.output : "");
	r->outcome.output = NULL; /* owned by c, freed below; the log holds the copy */
	/* The build's output as the sandbox left it, never followed: a builder that runs the
	 * candidate's code (a ModelNew module's top level) can leave a symbolic link to a host file
	 * there, which the compile cache would copy and the run sandbox's bind mount would show. */
	struct stat st;
	int built = !lstat(so_host, &st);
	r->ok = r->outcome.end == KG_SB_END_EXIT && r->outcome.exit_code == 0 && built && S_ISREG(st.st_mode);
	if (built && !S_ISREG(st.st_mode)) {
		size_t n = strlen(r->log);
		snprintf(r->log + n, sizeof(r->log) - n, "%skgate: the build's output %s is not a regular file (%s)\n",
			 n && r->log[n - 1] != '\n' ? "\n" : "", out_name,
			 S_ISLNK(st.st_mode) ? "a symbolic link" : "a directory or a special file");
		r->ok = 0;
	}
	if (r->ok && have_key) {
		kg_error ke = {0};
		if (kg_cache_put(o->cache, key, so_host, r->log, &ke))
			snprintf(r->cache_note, sizeof(r->cache_note), "not stored in the compile cache: %s", ke.msg);
	}
out:
	kg_sb_free(c);
	free(cmd);
	return rc;
}
