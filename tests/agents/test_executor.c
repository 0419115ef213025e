/* Unit tests of the executors' pure parts: which GPUs CUDA_VISIBLE_DEVICES and /dev name, how worker
 * slots are pinned to them (one per GPU, for any number of GPUs), and the Slurm batch script and
 * sbatch arguments (--gres=gpu:1 exactly where a GPU is asked for, shell quoting of hostile paths). */
#include <errno.h>
#include <fcntl.h>
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

#include "agents/executor.h"
#include "verifier/plan/backend.h"

static void test_visible(void **state)
{
	(void)state;
	char ids[KG_MAX_GPUS][32];
	assert_int_equal(kg_gpu_parse_visible("0,1,2,3", ids, KG_MAX_GPUS), 4);
	assert_string_equal(ids[3], "3");
	assert_int_equal(kg_gpu_parse_visible("3, 1", ids, KG_MAX_GPUS), 2); /* order kept, blanks trimmed */
	assert_string_equal(ids[0], "3");
	assert_string_equal(ids[1], "1");
	assert_int_equal(kg_gpu_parse_visible("", ids, KG_MAX_GPUS), 0); /* set but empty: no GPU */
	assert_int_equal(kg_gpu_parse_visible("0,,2", ids, KG_MAX_GPUS), 2);
	assert_int_equal(kg_gpu_parse_visible("0,1,-1,2", ids, KG_MAX_GPUS), 2); /* stops at the invalid entry */
	assert_int_equal(kg_gpu_parse_visible("GPU-8a1f2c3d-aaaa,MIG-5b6c", ids, KG_MAX_GPUS), 2);
	assert_string_equal(ids[1], "MIG-5b6c");
	assert_int_equal(kg_gpu_parse_visible("0,1,2,3,4,5,6,7", ids, 3), 3); /* bounded */
}

static void touch(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
}

static void test_scan_dev(void **state)
{
	(void)state;
	char dir[] = "/tmp/kgate-dev-XXXXXX", ids[KG_MAX_GPUS][32];
	assert_non_null(mkdtemp(dir));
	const char *names[] = {"nvidia10", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-modeset", "nvidia0", "null"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		touch(dir, names[i]);
	assert_int_equal(kg_gpu_scan_dev(dir, ids, KG_MAX_GPUS), 3);
	assert_string_equal(ids[0], "0");
	assert_string_equal(ids[1], "2");
	assert_string_equal(ids[2], "10");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(kg_gpu_scan_dev("/nonexistent", ids, KG_MAX_GPUS), 0);
}

/* n GPUs, n slots: each slot its own GPU; more slots than GPUs share round-robin; none: NULL. */
static void test_slots(void **state)
{
	(void)state;
	static char ids[KG_MAX_GPUS][32];
	for (int n = 1; n <= 8; n++) {
		for (int i = 0; i < n; i++)
			snprintf(ids[i], 32, "%d", 7 - i);
		int used[8] = {0};
		for (int slot = 0; slot < n; slot++)
			used[7 - atoi(kg_gpu_for_slot(ids, n, slot))]++;
		for (int i = 0; i < n; i++)
			assert_int_equal(used[i], 1);
	}
	assert_string_equal(kg_gpu_for_slot(ids, 2, 5), ids[1]);
	assert_null(kg_gpu_for_slot(ids, 0, 0));
	/* the default number of workers follows the GPUs */
	setenv("CUDA_VISIBLE_DEVICES", "4,5,6", 1);
	static char got[KG_MAX_GPUS][32];
	assert_int_equal(kg_gpu_list(got, KG_MAX_GPUS), 3);
	struct kg_backend gpu_be = {.needs_gpu = 1};
	assert_int_equal(kg_default_jobs(&gpu_be), 3);
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	assert_int_equal(kg_default_jobs(&gpu_be), 1);
	unsetenv("CUDA_VISIBLE_DEVICES");
}

static struct kg_slurm_job job(int gpu)
{
	return (struct kg_slurm_job){
		.exe = "/opt/kgate/bin/kgate",
		.task = "softmax",
		.candidate = "/shared/out/candidates/it's $(reboot).c",
		.policy = "/etc/kgate/ci.yaml",
		.backend = gpu ? "cuda" : "cpu",
		.iterations = 5,
		.trials = 0,
		.gpu = gpu,
		.timeout_s = 61,
		.partition = "h200",
		.extra = " --account=lab  --qos=short ",
		.script = "/shared/out/slurm/x.sh",
		.report = "/shared/out/slurm/x.report.json",
		.log = "/shared/out/slurm/x.log",
	};
}

static int has(const char **argv, const char *a)
{
	for (int i = 0; argv[i]; i++)
		if (!strcmp(argv[i], a))
			return 1;
	return 0;
}

static void test_sbatch(void **state)
{
	(void)state;
	char store[64][1024];
	const char *argv[64];
	struct kg_slurm_job j = job(1);
	int n = kg_slurm_sbatch_argv(&j, store, argv, 64);
	assert_string_equal(argv[0], "sbatch");
	assert_string_equal(argv[n - 1], "/shared/out/slurm/x.sh");
	assert_null(argv[n]);
	assert_true(has(argv, "--parsable") && has(argv, "--wait"));
	assert_true(has(argv, "--gres=gpu:1"));
	assert_true(has(argv, "--partition=h200"));
	assert_true(has(argv, "--time=2")); /* 61 s: two whole minutes */
	assert_true(has(argv, "--account=lab") && has(argv, "--qos=short"));
	assert_true(has(argv, "--output=/shared/out/slurm/x.log"));
	j = job(0);
	j.partition = NULL;
	j.timeout_s = 0;
	kg_slurm_sbatch_argv(&j, store, argv, 64);
	assert_false(has(argv, "--gres=gpu:1")); /* a CPU verification asks for no GPU */
	assert_false(has(argv, "--partition=h200"));
}

static void test_script(void **state)
{
	(void)state;
	kg_buf b = {0};
	struct kg_slurm_job j = job(1);
	assert_int_equal(kg_slurm_script(&j, &b), 0);
	const char *s = kg_buf_str(&b);
	assert_non_null(strstr(s, "exec srun --ntasks=1 --gres=gpu:1 '/opt/kgate/bin/kgate' 'verify' 'softmax' "));
	/* the hostile file name stays one quoted word */
	assert_non_null(strstr(s, "'/shared/out/candidates/it'\\''s $(reboot).c'"));
	assert_non_null(strstr(s, "'--report' 'json:/shared/out/slurm/x.report.json'"));
	assert_non_null(strstr(s, " --policy '/etc/kgate/ci.yaml' --iterations 5\n"));
	assert_null(strstr(s, "--trials"));
	assert_null(strstr(s, "--dims"));
	kg_buf_free(&b);
	j = job(0);
	assert_int_equal(kg_slurm_script(&j, &b), 0);
	assert_null(strstr(kg_buf_str(&b), "--gres"));
	kg_buf_free(&b);
	/* a module task: its path and dims go to every node's kgate verify, quoted */
	j = job(0);
	j.task = "/shared/kb/23_Softmax.py";
	j.candidate = "/shared/out/candidates/x.py";
	j.backend = "torch";
	j.dims = "batch_size=4,dim=64";
	assert_int_equal(kg_slurm_script(&j, &b), 0);
	s = kg_buf_str(&b);
	assert_non_null(strstr(s, "'verify' '/shared/kb/23_Softmax.py' '/shared/out/candidates/x.py' '--backend' 'torch' "));
	assert_non_null(strstr(s, " --policy '/etc/kgate/ci.yaml' --dims 'batch_size=4,dim=64' --iterations 5\n"));
	kg_buf_free(&b);
}

static void test_open(void **state)
{
	(void)state;
	struct kg_executor *x = NULL;
	kg_error e = {0};
	struct kg_executor_opts o = {.name = "kubernetes", .outdir = "."};
	assert_int_equal(kg_executor_open(&o, &x, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "unknown executor 'kubernetes' (known: local, slurm)"));
	o.name = NULL;
	assert_int_equal(kg_executor_open(&o, &x, &e), 0);
	assert_string_equal(x->ops->name, "local");
	kg_executor_close(x);
	o.name = "slurm";
	assert_int_equal(kg_executor_open(&o, &x, &e), 0);
	assert_string_equal(x->ops->name, "slurm");
	assert_true(x->outdir[0] == '/' && x->exe[0] == '/');
	kg_executor_close(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_visible), cmocka_unit_test(test_scan_dev), cmocka_unit_test(test_slots),
		cmocka_unit_test(test_sbatch),	cmocka_unit_test(test_script),	 cmocka_unit_test(test_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
