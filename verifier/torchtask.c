/* PyTorch tasks (torchtask.h): the torch runner's derive mode run in the torch backend's sandbox on a
 * copy of the module, its manifest read back between markers, and the module staged as the run's
 * reference. The module is trusted as a reference is, and still runs sandboxed: it is Python. */
#include "verifier/torchtask.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kg_ufile.h"
#include "sandbox/sandbox.h"
#include "verifier/backend.h"
#include "verifier/resolve.h"
#include "verifier/run.h"

#define BEGIN "--- kgate task ---\n"
#define END "--- end ---"
#define FAIL "kgate-derive: "

int kg_task_is_module(const char *path)
{
	size_t n = strlen(path);
	return n > 3 && !strcmp(path + n - 3, ".py");
}

/* The module's file name without ".py", in the characters a task name may hold. */
static void module_name(const char *module, char *out, size_t outsz)
{
	const char *base = strrchr(module, '/');
	base = base ? base + 1 : module;
	size_t n = 0;
	for (const char *c = base; *c && strcmp(c, ".py") && n + 1 < outsz; c++)
		out[n++] = (char)((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
					  *c == '_' || *c == '-'
				  ? *c
				  : '_');
	out[n] = '\0';
	if (!n)
		snprintf(out, outsz, "problem");
}

/* --dims as the derive takes it: NAME=INT pairs, comma-separated, nothing else (it becomes argv). */
static int check_dims(const char *dims, kg_error *e)
{
	for (const char *p = dims; *p;) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end || eq == p)
			return kg_err(e, -EINVAL, "--dims: expected NAME=VALUE[,NAME=VALUE...], got '%s'", dims);
		for (const char *c = p; c < eq; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
				return kg_err(e, -EINVAL, "--dims: '%.*s' is not a Python name", (int)(eq - p), p);
		if (eq + 1 == end)
			return kg_err(e, -EINVAL, "--dims: no value for '%.*s'", (int)(eq - p), p);
		for (const char *c = eq + 1; c < end; c++)
			if (*c < '0' || *c > '9' || end - eq > 12)
				return kg_err(e, -EINVAL, "--dims: '%.*s' is not a positive integer", (int)(end - eq - 1),
					      eq + 1);
		p = *end ? end + 1 : end;
	}
	return 0;
}

int kg_torch_derive(const char *module, const char *dims, const char *name, kg_buf *yaml, kg_error *e)
{
	const struct kg_backend *be = kg_backend_get(KG_BACKEND_TORCH);
	char py[PATH_MAX], why[160], script[PATH_MAX], modname[64];
	struct kg_ufile src = {0};
	int rc;
	if (dims && (rc = check_dims(dims, e)))
		return rc;
	if (kg_path_python(py, sizeof(py), why, sizeof(why)))
		return kg_err(e, -ENOENT, "%s", why);
	if (kg_path_runner_script(be->runner_script, script, sizeof(script)))
		return kg_err(e, -ENOENT, "%s not found beside kgate-run", be->runner_script);
	/* what runs is what was read: no link, a regular file, capped */
	if ((rc = kg_ufile_read(module, "module", KG_SOURCE_MAX, &src, e)))
		return rc;
	if (!name) {
		module_name(module, modname, sizeof(modname));
		name = modname;
	}
	char tmpl[PATH_MAX], file[PATH_MAX + 80];
	if ((rc = kg_mkdtemp(tmpl, sizeof(tmpl), "kgate-derive", e))) {
		kg_ufile_free(&src);
		return rc;
	}
	snprintf(file, sizeof(file), "%s/%s.py", tmpl, name);
	rc = kg_write_file(file, src.data, src.len, 0644, e);
	kg_ufile_free(&src);
	if (!rc)
		chmod(tmpl, 0755);
	char inside[PATH_MAX];
	snprintf(inside, sizeof(inside), "/kgate/lib/%s.py", name);
	const char *argv[] = {py, "-I", "-B", script, "--derive", inside, "--name", name,
			      "--dims", dims ? dims : "", NULL};
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp", "USER=kgate",
					   "OMP_NUM_THREADS=1", NULL};
	char prefix[PATH_MAX];
	struct kg_sb_path paths[3] = {{.host = file, .inside = inside}};
	int n_paths = 1;
	kg_python_sandbox_paths(py, script, prefix, sizeof(prefix), paths, &n_paths);
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_RUN,
		.name = "derive-torch",
		.argv = argv,
		.envp = envp,
		.paths = paths,
		.n_paths = n_paths,
		.limits = {.wall_s = 600, .mem_bytes = 16ull << 30, .output_keep = 256 * 1024,
			   .address_space_unbounded = be->address_space_unbounded},
		.allow_threads = 1,
		.stdin_fd = -1,
		.proc = be->proc,
		.sys_ro = be->sys_ro,
		.syscalls = be->syscalls,
		.readonly_opens = be->readonly_opens,
	};
	struct kg_sb_child *c = NULL;
	struct kg_sb_outcome o = {0};
	if (!rc && !(rc = kg_sb_spawn(&spec, &c, e)))
		kg_sb_wait(c, &o);
	unlink(file);
	rmdir(tmpl);
	if (rc) {
		kg_sb_free(c);
		return rc;
	}
	const char *out = o.output ? o.output : "";
	const char *b = strstr(out, BEGIN), *f = strstr(out, FAIL), *end = b ? strstr(b, END) : NULL;
	if (o.end == KG_SB_END_EXIT && !o.exit_code && b && end) {
		b += strlen(BEGIN);
		rc = kg_buf_append(yaml, b, (size_t)(end - b));
	} else if (f) {
		f += strlen(FAIL);
		const char *nl = strchr(f, '\n');
		rc = kg_err(e, -EINVAL, "%s: %.*s", module, (int)(nl ? nl - f : (long)strlen(f)), f);
	} else {
		char last[300];
		size_t n = strlen(out);
		snprintf(last, sizeof(last), "%s", n > 280 ? out + n - 280 : out);
		rc = kg_err(e, -EINVAL, "%s: deriving the task failed (%s %s%s%d): %s", module, kg_sb_end_name(o.end),
			    o.syscall[0] ? o.syscall : "", o.syscall[0] ? ", " : "",
			    o.end == KG_SB_END_SIGNAL ? o.signo : o.exit_code, last);
	}
	kg_sb_free(c);
	return rc;
}

int kg_torch_task_load(const char *module, const char *dims, struct kg_task *t, kg_error *e)
{
	kg_buf y = {0};
	char name[64];
	module_name(module, name, sizeof(name));
	int rc = kg_torch_derive(module, dims, name, &y, e);
	if (rc) {
		kg_buf_free(&y);
		return rc;
	}
	/* the manifest and a copy of the module side by side, loaded as any manifest is */
	char tmpl[PATH_MAX], yml[PATH_MAX + 16], mod[PATH_MAX + 80];
	if ((rc = kg_mkdtemp(tmpl, sizeof(tmpl), "kgate-task", e))) {
		kg_buf_free(&y);
		return rc;
	}
	snprintf(yml, sizeof(yml), "%s/task.yaml", tmpl);
	snprintf(mod, sizeof(mod), "%s/%s.py", tmpl, name);
	struct kg_ufile src = {0};
	if (!(rc = kg_ufile_read(module, "module", KG_SOURCE_MAX, &src, e)) &&
	    !(rc = kg_write_file(mod, src.data, src.len, 0644, e)) &&
	    !(rc = kg_write_file(yml, y.data, y.len, 0644, e)))
		rc = kg_task_load(yml, t, e);
	kg_ufile_free(&src);
	kg_buf_free(&y);
	unlink(yml);
	unlink(mod);
	rmdir(tmpl);
	if (rc)
		return rc;
	/* the task is the module: reports name it, and the plan reads the reference from it */
	char *abs = realpath(module, NULL);
	if (!abs)
		return kg_err(e, -errno, "%s: %s", module, strerror(errno));
	snprintf(t->path, sizeof(t->path), "%s", abs);
	snprintf(t->ref[KG_BACKEND_TORCH], sizeof(t->ref[KG_BACKEND_TORCH]), "%s", abs);
	kg_dirname(abs, t->dir, sizeof(t->dir));
	free(abs);
	return 0;
}

int kg_torch_import(const char *module, const char *dims, const char *out_dir, kg_error *e)
{
	kg_buf y = {0};
	char name[64], yml[PATH_MAX], mod[PATH_MAX];
	module_name(module, name, sizeof(name));
	struct kg_ufile src = {0};
	int rc = kg_torch_derive(module, dims, name, &y, e);
	if (!rc)
		rc = kg_mkdirs(out_dir, 0755, e);
	snprintf(yml, sizeof(yml), "%s/task.yaml", out_dir);
	snprintf(mod, sizeof(mod), "%s/%s.py", out_dir, name);
	if (!rc && !(rc = kg_ufile_read(module, "module", KG_SOURCE_MAX, &src, e)) &&
	    !(rc = kg_write_file(mod, src.data, src.len, 0644, e)))
		rc = kg_write_file(yml, y.data, y.len, 0644, e);
	kg_ufile_free(&src);
	kg_buf_free(&y);
	return rc;
}

int kg_torch_stage_ref(struct kg_run *r, kg_error *e)
{
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/ref", r->work);
	if (mkdir(dir, 0755))
		return kg_err(e, -errno, "mkdir %s: %s", dir, strerror(errno));
	snprintf(r->ref_so, sizeof(r->ref_so), "%s/problem.py", dir);
	return kg_write_file(r->ref_so, r->plan->ref_src.data, r->plan->ref_src.len, 0644, e);
}
