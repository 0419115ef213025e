/* The resolver (resolve.h): search paths for tasks and policies, and the backend of a candidate.
 * Where kgate's own files and the Python with torch are on this host is paths.c. */
#include "verifier/plan/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "verifier/plan/torchtask.h"

/* A name, not a path: the search paths are only searched for plain names. */
static int is_path(const char *s)
{
	return strchr(s, '/') || strstr(s, ".yaml");
}

int kg_resolve_policy(const char *name_or_path, struct kg_policy *p, kg_error *e)
{
	/* the environment's default (a CI job sets it once) is as explicit as --policy: not found is an
	 * error, never the built-in defaults */
	const char *env = getenv("KGATE_POLICY");
	if (!name_or_path && env && *env)
		name_or_path = env;
	const char *name = name_or_path ? name_or_path : "default";
	if (is_path(name))
		return kg_policy_load(name, p, e);
	const char *home = getenv("KGATE_HOME");
	char cand[3][PATH_MAX];
	int n = 0;
	if (home && *home)
		snprintf(cand[n++], PATH_MAX, "%s/policy/%s.yaml", home, name);
	snprintf(cand[n++], PATH_MAX, "%s/%s.yaml", KG_SYSCONFDIR, name);
	snprintf(cand[n++], PATH_MAX, "policy/%s.yaml", name);
	for (int i = 0; i < n; i++)
		if (!access(cand[i], R_OK))
			return kg_policy_load(cand[i], p, e);
	if (!name_or_path) {
		kg_policy_defaults(p);
		return 0;
	}
	return kg_err(e, -ENOENT, "policy '%s' not found (looked in $KGATE_HOME/policy, %s, ./policy)", name,
		      KG_SYSCONFDIR);
}

int kg_task_dirs(char dirs[KG_TASK_DIRS_MAX][4096])
{
	int n = 0;
	const char *env = getenv("KGATE_TASKS");
	if (env && *env)
		snprintf(dirs[n++], 4096, "%s", env);
	const char *home = getenv("KGATE_HOME");
	if (home && *home)
		snprintf(dirs[n++], 4096, "%s/tasks", home);
	snprintf(dirs[n++], 4096, "%s", KG_DATADIR "/tasks");
	snprintf(dirs[n++], 4096, "tasks");
	return n;
}

int kg_resolve_task(const char *name_or_path, struct kg_task *t, kg_error *e)
{
	if (is_path(name_or_path))
		return kg_task_load(name_or_path, t, e);
	char dirs[KG_TASK_DIRS_MAX][4096];
	int nd = kg_task_dirs(dirs);
	for (int i = 0; i < nd; i++) {
		char p[PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/%s/task.yaml", dirs[i], name_or_path) >= (int)sizeof(p))
			continue;
		if (!access(p, R_OK))
			return kg_task_load(p, t, e);
	}
	return kg_err(e, -ENOENT, "task '%s' not found (looked in $KGATE_TASKS, $KGATE_HOME/tasks, %s/tasks, ./tasks)",
		      name_or_path, KG_DATADIR);
}

int kg_resolve_task_dims(const char *task, const char *dims, struct kg_task *t, kg_error *e)
{
	/* a KernelBench-format module is a task too: derived in its sandbox, its Model the reference */
	if (kg_task_is_module(task))
		return kg_torch_task_load(task, dims, t, e);
	if (dims)
		return kg_err(e, -EINVAL, "--dims applies to a PyTorch module task (PROBLEM.py); a manifest has shape sets");
	return kg_resolve_task(task, t, e);
}

struct found {
	char name[256];
	char path[PATH_MAX];
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct found *)a)->name, ((const struct found *)b)->name);
}

int kg_tasks_each(kg_task_visit_fn fn, void *ctx)
{
	char dirs[KG_TASK_DIRS_MAX][4096];
	int nd = kg_task_dirs(dirs), n = 0, cap = 0, rc = 0;
	struct found *f = NULL;
	for (int i = 0; i < nd; i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(f->name))
				continue;
			int dup = 0;
			for (int k = 0; k < n && !dup; k++)
				dup = !strcmp(f[k].name, de->d_name);
			char p[PATH_MAX];
			if (dup || snprintf(p, sizeof(p), "%s/%s/task.yaml", dirs[i], de->d_name) >= (int)sizeof(p) ||
			    access(p, R_OK))
				continue;
			if (n == cap) {
				struct found *g = realloc(f, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*f));
				if (!g) {
					rc = -ENOMEM;
					break;
				}
				f = g;
			}
			snprintf(f[n].name, sizeof(f[n].name), "%s", de->d_name);
			snprintf(f[n].path, sizeof(f[n].path), "%s", p);
			n++;
		}
		if (d)
			closedir(d);
		if (rc)
			break;
	}
	if (!rc && n)
		qsort(f, (size_t)n, sizeof(*f), by_name);
	for (int k = 0; k < n && !rc; k++)
		rc = fn(f[k].name, f[k].path, ctx);
	free(f);
	return rc;
}

int kg_resolve_backend(const char *name, const char *candidate, const struct kg_backend **out, kg_error *e)
{
	enum kg_backend_id id;
	if (name) {
		if (kg_backend_parse(name, &id))
			return kg_err(e, -EINVAL, "unknown backend '%s' (%s)", name, kg_backend_names());
	} else if (kg_backend_for_path(candidate, &id)) {
		/* a file of no known kind is built as C, whose compiler names the problem */
		id = KG_BACKEND_CPU;
	}
	*out = kg_backend_get(id);
	return 0;
}

const struct kg_backend *kg_resolve_default_backend(const struct kg_task *t, int gpu_present)
{
	for (int i = 0; i < KG_BACKEND_COUNT_; i++) {
		const struct kg_backend *b = kg_backend_get((enum kg_backend_id)i);
		if (b->needs_gpu && gpu_present && t->ref[i][0])
			return b;
	}
	return kg_backend_get(KG_BACKEND_CPU);
}
