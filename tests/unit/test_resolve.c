/* The resolver: the task search path in its order (first directory wins, ./tasks included), the
 * default policy, and backends by name or by file extension. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/sandbox.h"
#include "verifier/plan/gpu.h"
#include "verifier/plan/resolve.h"

struct seen {
	int n;
	char names[8][64], paths[8][512];
};

static int visit(const char *name, const char *path, void *ctx)
{
	struct seen *s = ctx;
	if (s->n < 8) {
		snprintf(s->names[s->n], 64, "%s", name);
		snprintf(s->paths[s->n], 512, "%s", path);
		s->n++;
	}
	return 0;
}

static void touch_task(const char *dir, const char *name)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	mkdir(dir, 0755);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/task.yaml", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs("kgate_task: 1\n", f);
	fclose(f);
}

static void test_task_dirs(void **state)
{
	(void)state;
	char root[] = "/tmp/kgate-resolve-XXXXXX", env[1100], cwd[1100], old[4096];
	assert_non_null(mkdtemp(root));
	assert_non_null(getcwd(old, sizeof(old)));
	snprintf(env, sizeof(env), "%s/env", root);
	snprintf(cwd, sizeof(cwd), "%s/cwd", root);
	touch_task(env, "zeta");
	touch_task(env, "shared");
	mkdir(cwd, 0755);
	char local[1200];
	snprintf(local, sizeof(local), "%s/tasks", cwd);
	touch_task(local, "alpha");
	touch_task(local, "shared");
	setenv("KGATE_TASKS", env, 1);
	unsetenv("KGATE_HOME");
	assert_int_equal(chdir(cwd), 0);
	char dirs[KG_TASK_DIRS_MAX][4096];
	int n = kg_task_dirs(dirs);
	assert_string_equal(dirs[0], env);
	assert_string_equal(dirs[n - 1], "tasks");
	struct seen s = {0};
	assert_int_equal(kg_tasks_each(visit, &s), 0);
	/* sorted, each name once, from the first directory that holds it */
	assert_int_equal(s.n, 3);
	assert_string_equal(s.names[0], "alpha");
	assert_string_equal(s.names[1], "shared");
	assert_string_equal(s.names[2], "zeta");
	assert_non_null(strstr(s.paths[1], "/env/shared/task.yaml"));
	assert_string_equal(s.paths[0], "tasks/alpha/task.yaml");
	/* a name the search path lacks is an error that says where it looked */
	struct kg_task *t = malloc(sizeof(*t));
	kg_error e = {0};
	assert_int_equal(kg_resolve_task("nosuch", t, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "./tasks"));
	free(t);
	assert_int_equal(chdir(old), 0);
	unsetenv("KGATE_TASKS");
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

static void test_policy_and_backend(void **state)
{
	(void)state;
	struct kg_policy *p = malloc(sizeof(*p));
	kg_error e = {0};
	char old[4096];
	assert_non_null(getcwd(old, sizeof(old)));
	/* where no default policy is installed or near, the built-in defaults */
	setenv("KGATE_HOME", "/nonexistent", 1);
	assert_int_equal(chdir("/"), 0);
	assert_int_equal(kg_resolve_policy(NULL, p, &e), 0);
	assert_string_equal(p->path, "");
	assert_int_equal(kg_resolve_policy("nosuch", p, &e), -ENOENT);
	assert_int_equal(chdir(old), 0);
	unsetenv("KGATE_HOME");
	free(p);
	const struct kg_backend *b;
	assert_int_equal(kg_resolve_backend(NULL, "x/k.cu", &b, &e), 0);
	assert_int_equal(b->id, KG_BACKEND_CUDA);
	assert_int_equal(kg_resolve_backend(NULL, "k.c", &b, &e), 0);
	assert_int_equal(b->id, KG_BACKEND_CPU);
	assert_int_equal(kg_resolve_backend("cpu", "k.cu", &b, &e), 0);
	assert_int_equal(b->id, KG_BACKEND_CPU);
	assert_int_equal(kg_resolve_backend("metal", "k.c", &b, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "cpu, cuda"));
	/* a search picks the GPU backend only where the task has its reference and a GPU is there */
	struct kg_task *t = calloc(1, sizeof(*t));
	snprintf(t->ref[KG_BACKEND_CPU], PATH_MAX, "/r.c");
	assert_int_equal(kg_resolve_default_backend(t, 1)->id, KG_BACKEND_CPU);
	snprintf(t->ref[KG_BACKEND_CUDA], PATH_MAX, "/r.cu");
	assert_int_equal(kg_resolve_default_backend(t, 0)->id, KG_BACKEND_CPU);
	assert_int_equal(kg_resolve_default_backend(t, 1)->id, KG_BACKEND_CUDA);
	free(t);
}

/* Where a module's torch runs: the host unless a GPU is present and the torch has CUDA, and never
 * on the GPU when KGATE_TORCH_DEVICE=cpu; each "not" says why. */
static void test_torch_placement(void **state)
{
	(void)state;
	struct kg_gpu_info g;
	char why[200];
	unsetenv("KGATE_TORCH_DEVICE");
	assert_int_equal(kg_torch_placement("torch 1.13.0a0 (no torch.compile) (no CUDA)", &g, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "has no CUDA"));
	assert_int_equal(kg_torch_placement(NULL, &g, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "no Python with torch"));
	setenv("KGATE_NO_GPU", "1", 1);
	assert_int_equal(kg_torch_placement("torch 2.11.0+cu130 (CUDA 13.0), Triton", &g, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "no GPU (KGATE_NO_GPU is set)"));
	unsetenv("KGATE_NO_GPU");
	setenv("KGATE_TORCH_DEVICE", "cpu", 1);
	assert_int_equal(kg_torch_placement("torch 2.11.0+cu130 (CUDA 13.0), Triton", &g, why, sizeof(why)), 0);
	assert_string_equal(why, "KGATE_TORCH_DEVICE=cpu");
	unsetenv("KGATE_TORCH_DEVICE");
}

/* A virtual environment whose python3 links to another interpreter: its own prefix is shown (its
 * site-packages hold torch) beside the interpreter's; a plain interpreter under /usr shows none. */
static void test_python_venv_paths(void **state)
{
	(void)state;
	char dir[] = "/tmp/kgate-test-venv-XXXXXX", p[600], prefix[4096];
	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/bin", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/bin/python3", dir);
	assert_int_equal(symlink("/usr/bin/python3", p), 0);
	char cfg[600];
	snprintf(cfg, sizeof(cfg), "%s/pyvenv.cfg", dir);
	FILE *f = fopen(cfg, "w");
	assert_non_null(f);
	fputs("home = /usr/bin\n", f);
	fclose(f);
	struct kg_sb_path paths[4];
	int n = 0;
	kg_python_sandbox_paths(p, "/usr/lib/kgate/torch_runner.py", prefix, sizeof(prefix), paths, &n);
	assert_int_equal(n, 1);
	assert_string_equal(paths[0].host, dir);
	assert_true(paths[0].flags & KG_SB_PATH_EXEC);
	/* without pyvenv.cfg it is no environment: nothing but /usr */
	unlink(cfg);
	n = 0;
	kg_python_sandbox_paths(p, "/usr/lib/kgate/torch_runner.py", prefix, sizeof(prefix), paths, &n);
	assert_int_equal(n, 0);
	unlink(p);
	snprintf(p, sizeof(p), "%s/bin", dir);
	rmdir(p);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_task_dirs),
		cmocka_unit_test(test_policy_and_backend),
		cmocka_unit_test(test_torch_placement),
		cmocka_unit_test(test_python_venv_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
