/* PyTorch tasks (torchtask.h): a module's manifest derived in the torch backend's sandbox
 * (torchderive.c), loaded or written beside a copy of the module, and the module staged as the
 * run's reference. The module is trusted as a reference is, and still runs sandboxed: it is Python. */
#include "verifier/plan/torchtask.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kg_ufile.h"
#include "verifier/run.h"
#include "verifier/plan/torchderive.h"

/* a run's state: its kept buffers at every shape (a minGPT mask at 1024 is 4 MiB a shape) */
#define STATE_MAX (1ull << 30)


int kg_task_is_module(const char *path)
{
	size_t n = strlen(path);
	return n > 3 && !strcmp(path + n - 3, ".py");
}

void kg_torch_task_name(const char *module, char *out, size_t outsz)
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

int kg_torch_derive(const char *module, const char *dims, const char *name, kg_buf *yaml, kg_error *e)
{
	char modname[64];
	if (!name) {
		kg_torch_task_name(module, modname, sizeof(modname));
		name = modname;
	}
	/* one module: the same sandboxed derivation as a directory's, with the bound a single
	 * derivation always had */
	struct kg_torch_job j = {.module = module, .name = name};
	struct kg_torch_derive_opts o = {.dims = dims, .file_s = 600, .workers = 1};
	int rc = kg_torch_derive_jobs(&j, 1, &o, e);
	if (!rc && j.rc)
		rc = kg_err(e, j.rc, "%s", j.msg);
	if (!rc)
		rc = kg_buf_append(yaml, j.yaml.data, j.yaml.len);
	kg_buf_free(&j.yaml);
	return rc;
}

int kg_torch_task_load(const char *module, const char *dims, struct kg_task *t, kg_error *e)
{
	kg_buf y = {0};
	char name[64];
	kg_torch_task_name(module, name, sizeof(name));
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
	snprintf(t->baseline_torch, sizeof(t->baseline_torch), "%s", abs); /* eager and compile of its Model */
	kg_dirname(abs, t->dir, sizeof(t->dir));
	free(abs);
	return 0;
}

int kg_torch_write_task(const char *module, const char *name, const kg_buf *yaml, const char *out_dir, kg_error *e)
{
	char yml[PATH_MAX + 16], mod[PATH_MAX + 80];
	struct kg_ufile src = {0};
	int rc = kg_mkdirs(out_dir, 0755, e);
	snprintf(yml, sizeof(yml), "%s/task.yaml", out_dir);
	snprintf(mod, sizeof(mod), "%s/%s.py", out_dir, name);
	if (!rc && !(rc = kg_ufile_read(module, "module", KG_SOURCE_MAX, &src, e)) &&
	    !(rc = kg_write_file(mod, src.data, src.len, 0644, e)))
		rc = kg_write_file(yml, yaml->data, yaml->len, 0644, e);
	kg_ufile_free(&src);
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

static const char *const roles[] = {"activation", "weight", "bias", "statistic", "variance"};

/* The spec; all_forward: every input named an activation (the forward's), whatever its role. */
static int state_spec(const struct kg_plan *p, int all_forward, kg_buf *spec, kg_error *e)
{
	char line[512];
	int rc = 0;
	snprintf(line, sizeof(line), "mode %s\n", kg_module_mode_name(p->pol.module_mode));
	rc = kg_buf_append(spec, line, strlen(line));
	for (int i = 0; !rc && i < p->task.n_inputs; i++) {
		const struct kg_tensor_spec *t = &p->task.inputs[i];
		snprintf(line, sizeof(line), "input %s %s\n", t->name,
			 all_forward ? roles[0]
			 : (unsigned)t->role < sizeof(roles) / sizeof(roles[0]) ? roles[t->role]
										: "weight");
		rc = kg_buf_append(spec, line, strlen(line));
	}
	for (int s = 0; !rc && s < p->n_shapes; s++) {
		snprintf(line, sizeof(line), "shape %s\n", p->shape_str[s]);
		rc = kg_buf_append(spec, line, strlen(line));
	}
	return rc ? kg_err(e, rc, "out of memory") : 0;
}

int kg_torch_state_spec(const struct kg_plan *p, kg_buf *spec, kg_error *e)
{
	return state_spec(p, 0, spec, e);
}

int kg_torch_state_spec_forward(const struct kg_plan *p, kg_buf *spec, kg_error *e)
{
	return state_spec(p, 1, spec, e);
}

/* "a b c" at p: the next word into out (up to a space or the line's end). */
static const char *word(const char *p, const char *end, char *out, size_t outsz)
{
	size_t n = 0;
	while (p < end && *p == ' ')
		p++;
	while (p < end && *p != ' ' && *p != '\n') {
		if (n + 1 < outsz)
			out[n++] = *p;
		p++;
	}
	out[n] = '\0';
	return p;
}

int kg_torch_state_parse(const char *data, size_t len, struct kg_torch_state *st, kg_error *e)
{
	const char *p = data, *end = data + len;
	int json = 0;
	st->n_shapes = st->n_entries = st->n_more = 0;
	snprintf(st->mode, sizeof(st->mode), "train");
	snprintf(st->mode_from, sizeof(st->mode_from), "problem");
	if (len < 14 || memcmp(data, "kgate-state 1\n", 14))
		return kg_err(e, -EPROTO, "the state file does not begin \"kgate-state 1\"");
	while (p < end && !json) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		char w[64], a[64];
		const char *q = word(p, le, w, sizeof(w));
		if (!strcmp(w, "mode")) {
			q = word(q, le, st->mode, sizeof(st->mode));
			word(q, le, st->mode_from, sizeof(st->mode_from));
		} else if (!strcmp(w, "shape")) {
			q = word(q, le, a, sizeof(a));
			long k = strtol(a, NULL, 10);
			q = word(q, le, w, sizeof(w));
			if (k < 0 || k >= KG_TORCH_MAX_SHAPES)
				return kg_err(e, -EPROTO, "the state file names shape %ld", k);
			if (k >= st->n_shapes)
				st->n_shapes = (int)k + 1;
			st->refused[k] = !strcmp(w, "refused");
			while (q < le && *q == ' ')
				q++;
			snprintf(st->why[k], sizeof(st->why[k]), "%.*s", (int)(le - q), q);
		} else if (!strcmp(w, "entry")) {
			if (st->n_entries >= (int)(sizeof(st->entries) / sizeof(st->entries[0]))) {
				st->n_more++;
			} else {
				struct kg_module_entry *x = &st->entries[st->n_entries++];
				q = word(q, le, x->name, sizeof(x->name));
				q = word(q, le, x->how, sizeof(x->how));
				q = word(q, le, x->kind, sizeof(x->kind));
				q = word(q, le, x->dtype, sizeof(x->dtype));
				word(q, le, x->shape, sizeof(x->shape));
			}
		} else if (!strcmp(w, "json")) {
			json = 1;
		}
		p = nl ? nl + 1 : end;
	}
	if (!json)
		return kg_err(e, -EPROTO, "the state file has no \"json\" line");
	return 0;
}

int kg_torch_state_build(const char *module, const char *dir, const char *spec, struct kg_torch_state *st,
			 kg_error *e)
{
	struct kg_torch_job j = {.module = module, .name = "problem", .verb = "state", .spec = spec,
				 .reply_max = STATE_MAX};
	struct kg_torch_derive_opts o = {.file_s = 600, .workers = 1};
	int rc = kg_torch_derive_jobs(&j, 1, &o, e);
	if (!rc && j.rc)
		rc = kg_err(e, j.rc, "%s", j.msg);
	snprintf(st->path, sizeof(st->path), "%s/state", dir);
	if (!rc)
		rc = kg_torch_state_parse(j.yaml.data, j.yaml.len, st, e);
	if (!rc)
		rc = kg_write_file(st->path, j.yaml.data, j.yaml.len, 0644, e);
	kg_buf_free(&j.yaml);
	return rc;
}
