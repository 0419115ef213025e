/* Fuzz harness: task manifests (verifier/plan/task.c over common/kg_yaml.c and its limits). Each input
 * is written as task.yaml in a scratch directory that also holds the references it may name. */
#include <stdlib.h>
#include <unistd.h>

#define FUZZ_NAME "task"
#include "tests/fuzz/fuzz_main.h"
#include "verifier/plan/task.h"

static char dir[64] = "";
static char path[128];
static struct kg_task *task;

static void cleanup(void)
{
	if (dir[0])
		kg_rmtree(dir);
}

static void fuzz_setup(void)
{
	kg_error e = {0};
	char p[128];
	snprintf(dir, sizeof(dir), "%s/kgate-fuzz-task-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	snprintf(p, sizeof(p), "%s/reference.c", dir);
	kg_write_file(p, "/* ref */\n", 10, 0644, &e);
	snprintf(p, sizeof(p), "%s/reference.cu", dir);
	kg_write_file(p, "/* ref */\n", 10, 0644, &e);
	snprintf(path, sizeof(path), "%s/task.yaml", dir);
	task = malloc(sizeof(*task));
	if (!task)
		abort();
}

static void fuzz_one(const uint8_t *data, size_t len)
{
	kg_error e = {0};
	if (kg_write_file(path, data, len, 0644, &e))
		abort();
	kg_task_load(path, task, &e);
}
