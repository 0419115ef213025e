/* Unit tests of policies: the shipped files load, unknown keys and bad values are errors naming
 * file and line, and the queries (tolerance widening, allowlists) behave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "verifier/plan/inputs.h"

static int load_text(const char *text, struct kg_policy *p, kg_error *e)
{
	char path[] = "/tmp/kgate-test-policy-XXXXXX.yaml";
	int fd = mkstemps(path, 5);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	memset(e, 0, sizeof(*e));
	int rc = kg_policy_load(path, p, e);
	if (rc)
		assert_non_null(strstr(e->msg, path));
	unlink(path);
	return rc;
}

static void test_shipped(void **state)
{
	(void)state;
	const char *home = getenv("KGATE_HOME");
	const char *names[] = {"default", "strict", "ci"};
	struct kg_policy *p = malloc(sizeof(*p));
	for (int i = 0; i < 3; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/policy/%s.yaml", home ? home : ".", names[i]);
		kg_error e = {0};
		if (kg_policy_load(path, p, &e))
			fail_msg("%s: %s", names[i], e.msg);
	}
	/* strict requires every layer and a speed gate */
	assert_true(p != NULL);
	char path[512];
	snprintf(path, sizeof(path), "%s/policy/strict.yaml", home ? home : ".");
	kg_error e = {0};
	assert_int_equal(kg_policy_load(path, p, &e), 0);
	assert_true(p->required_layers & KG_SB_LAYER_LANDLOCK);
	assert_true(p->min_speedup == 1.0);
	assert_int_equal(p->trials, 4);
	assert_int_equal(p->compute_sanitizer, (1u << KG_SAN_COUNT_) - 1); /* every tool */
	free(p);
}

static void test_errors(void **state)
{
	(void)state;
	struct kg_policy *p = malloc(sizeof(*p));
	kg_error e;
	struct {
		const char *text, *expect;
	} cases[] = {
		{"kgate_policy: 1\ntrails: 3\n", ":2: unknown key 'trails'"},
		{"kgate_policy: 1\ntrials: 0\n", "trials"},
		{"kgate_policy: 1\ntolerance:\n  precision: fp8\n", ":3: field 'tolerance.precision'"},
		{"kgate_policy: 1\ntolerance: {atol: -1}\n", "tolerance.atol"},
		{"kgate_policy: 1\nclasses: [normal, weird]\n", "unknown class 'weird'"},
		{"kgate_policy: 1\nclasses: [zeros]\n", "'normal' is required"},
		{"kgate_policy: 1\nshapes: all\n", ":2: field 'shapes'"},
		{"kgate_policy: 1\nmodule_mode: inference\n", ":2: field 'module_mode'"},
		{"kgate_policy: 1\nmodule_mode: [train]\n", "module_mode"},
		{"kgate_policy: 1\nsandbox:\n  required_layers: [selinux]\n", "unknown layer 'selinux'"},
		{"kgate_policy: 1\nsandbox:\n  memory_mb: lots\n", ":3: field 'sandbox.memory_mb'"},
		{"kgate_policy: 1\ntiming:\n  iterations: 5\n  warmpu: 1\n", ":4: unknown key 'warmpu'"},
		{"kgate_policy: 1\ngpu: {required: maybe}\n", "gpu.required"},
		{"kgate_policy: 1\ngpu: {compute_sanitizer: maybe}\n", "a list of memcheck"},
		{"kgate_policy: 1\ngpu:\n  compute_sanitizer: [memcheck, leakcheck]\n", ":3: field 'gpu.compute_sanitizer': unknown tool 'leakcheck'"},
		{"kgate_policy: 1\ngpu:\n  memory_mb: 8\n", ":3: field 'gpu.memory_mb'"},
		{"kgate_policy: 1\ngpu: {memory_mb: lots}\n", "gpu.memory_mb"},
		{"kgate_policy: 1\ngpu: {tensor_maps: sometimes}\n", "gpu.tensor_maps"},
		{"kgate_policy: 1\ngpu: {driver_entry_points: 1.5}\n", "gpu.driver_entry_points"},
		{"kgate_policy: 1\ngpu: {memory: 100}\n", "unknown key 'memory'"},
		{"kgate_policy: 2\n", "kgate_policy"},
		{"trials: 2\n", "kgate_policy"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!load_text(cases[i].text, p, &e))
			fail_msg("case %zu loaded", i);
		if (!strstr(e.msg, cases[i].expect))
			fail_msg("case %zu: '%s' not in: %s", i, cases[i].expect, e.msg);
	}
	free(p);
}

static void test_queries(void **state)
{
	(void)state;
	struct kg_policy *p = malloc(sizeof(*p));
	kg_error e;
	assert_int_equal(load_text("kgate_policy: 1\nsymbols:\n  extra: [my_helper, \"cblas_*\"]\n", p, &e), 0);
	assert_true(kg_policy_symbol_allowed(p, "expf"));
	assert_true(kg_policy_symbol_allowed(p, "my_helper"));
	assert_true(kg_policy_symbol_allowed(p, "cblas_sgemm"));
	const char *forbidden[] = {"dlsym", "dlopen", "mprotect", "ptrace", "syscall", "socket", "fork",
				   "execve", "fopen", "open", "system", "pthread_create", "getenv"};
	for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
		if (kg_policy_symbol_allowed(p, forbidden[i]))
			fail_msg("%s allowed", forbidden[i]);
	assert_true(kg_policy_library_allowed(p, "libm.so.6"));
	assert_false(kg_policy_library_allowed(p, "libcublas.so.13"));
	assert_false(kg_policy_library_allowed(p, "libgomp.so.1"));
	p->threads = 1;
	assert_true(kg_policy_symbol_allowed(p, "pthread_create"));
	assert_true(kg_policy_library_allowed(p, "libgomp.so.1"));
	/* a backend's runtime is the backend table's (test_backend.c), never the policy's */
	assert_false(kg_policy_symbol_allowed(p, "cudaLaunchKernel"));
	assert_false(kg_policy_library_allowed(p, "libcudart.so.13"));
	assert_true(kg_policy_flag_allowed(p, "-O3"));
	assert_false(kg_policy_flag_allowed(p, "-fplugin=evil.so"));

	double a, r, m;
	kg_policy_defaults(p);
	kg_policy_tolerance(p, 1e-6, 1e-5, 0, &a, &r, &m);
	assert_true(a == 1e-6 && r == 1e-5 && m == 0);
	p->precision = KG_PREC_BF16;
	kg_policy_tolerance(p, 1e-6, 1e-5, 0, &a, &r, &m);
	assert_true(r >= 1e-2 && a > 1e-6 && m >= 1e-2);
	assert_int_equal(load_text("kgate_policy: 1\ntolerance: {atol: 0.5, rtol: task}\n", p, &e), 0);
	kg_policy_tolerance(p, 1e-6, 1e-5, 0, &a, &r, &m);
	assert_true(a == 0.5 && r == 1e-5);
	/* the reduction-length term: a quarter of n*u by default, its cap from the precision */
	assert_true(p->growth == 0.25);
	assert_true(kg_policy_growth_cap(p) == 1.0 / 1024);
	assert_int_equal(load_text("kgate_policy: 1\ntolerance: {precision: bf16, growth: 1}\n", p, &e), 0);
	assert_true(p->growth == 1 && kg_policy_growth_cap(p) == 1.0 / 32);
	assert_true(load_text("kgate_policy: 1\ntolerance: {growth: -1}\n", p, &e) < 0);
	assert_non_null(strstr(e.msg, "tolerance.growth"));

	/* compute-sanitizer: true means memcheck; a list names each tool's run */
	assert_int_equal(p->compute_sanitizer, 0);
	assert_int_equal(load_text("kgate_policy: 1\ngpu: {compute_sanitizer: true}\n", p, &e), 0);
	assert_int_equal(p->compute_sanitizer, 1u << KG_SAN_MEMCHECK);
	assert_int_equal(load_text("kgate_policy: 1\ngpu: {compute_sanitizer: [racecheck, memcheck, synccheck]}\n", p, &e),
			 0);
	assert_int_equal(p->compute_sanitizer,
			 1u << KG_SAN_MEMCHECK | 1u << KG_SAN_RACECHECK | 1u << KG_SAN_SYNCCHECK);
	assert_string_equal(kg_sanitizer_tool_name(KG_SAN_INITCHECK), "initcheck");

	/* a module task's mode: the problem's by default (KernelBench never calls eval()), or the
	 * one named */
	kg_policy_defaults(p);
	assert_int_equal(p->module_mode, KG_MODULE_MODE_PROBLEM);
	assert_int_equal(load_text("kgate_policy: 1\nmodule_mode: eval\n", p, &e), 0);
	assert_int_equal(p->module_mode, KG_MODULE_MODE_EVAL);
	assert_string_equal(kg_module_mode_name(p->module_mode), "eval");
	assert_int_equal(load_text("kgate_policy: 1\nmodule_mode: train\n", p, &e), 0);
	assert_int_equal(p->module_mode, KG_MODULE_MODE_TRAIN);
	assert_int_equal(load_text("kgate_policy: 1\n", p, &e), 0);
	assert_string_equal(kg_module_mode_name(p->module_mode), "problem");
	free(p);
}

/* The gpu section's bounds and routes: device memory (8 GiB unless the policy says), the driver's
 * tensor-map encoders imported by name (on unless the policy turns them off; nothing else of the
 * driver's with them), and the runtime's driver entry points (off unless the policy lifts them). */
static void test_gpu(void **state)
{
	(void)state;
	struct kg_policy *p = malloc(sizeof(*p));
	kg_error e;
	kg_policy_defaults(p);
	assert_int_equal(p->gpu_memory_bytes, 8ull << 30);
	assert_true(kg_policy_gpu_symbol_allowed(p, "cuTensorMapEncodeTiled"));
	assert_true(kg_policy_gpu_symbol_allowed(p, "cuTensorMapEncodeIm2col"));
	assert_true(kg_policy_gpu_symbol_allowed(p, "cuTensorMapReplaceAddress"));
	assert_false(kg_policy_gpu_symbol_allowed(p, "cuTensorMapEncodeTiledX"));
	assert_false(kg_policy_gpu_symbol_allowed(p, "cuCtxCreate_v2"));
	assert_false(kg_policy_gpu_symbol_allowed(p, "cudaGetDriverEntryPoint"));
	assert_false(kg_policy_symbol_allowed(p, "cuTensorMapEncodeTiled")); /* the gpu section's, alone */
	assert_int_equal(load_text("kgate_policy: 1\ngpu: {memory_mb: 512, tensor_maps: false, driver_entry_points: true}\n", p, &e),
			 0);
	assert_int_equal(p->gpu_memory_bytes, 512ull << 20);
	assert_false(kg_policy_gpu_symbol_allowed(p, "cuTensorMapEncodeTiled"));
	assert_true(kg_policy_gpu_symbol_allowed(p, "cudaGetDriverEntryPoint"));
	assert_true(kg_policy_gpu_symbol_allowed(p, "cudaGetDriverEntryPointByVersion"));
	assert_false(kg_policy_gpu_symbol_allowed(p, "cuGetProcAddress_v2"));
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_queries),
		cmocka_unit_test(test_gpu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
