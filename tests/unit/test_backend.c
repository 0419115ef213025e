/* The backend table: names from the vocabulary, each backend's command line, its sandbox data and
 * the imports its runtime brings (allowed, and the few always denied). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>

#include "verifier/plan/backend.h"
#include "verifier/phases/warmup.h"
#include "verifier/plan/resolve.h"

static int has_arg(const struct kg_compile_cmd *c, const char *arg)
{
	for (int i = 0; i < c->argc; i++)
		if (!strcmp(c->argv[i], arg))
			return i;
	return -1;
}

static void test_table(void **state)
{
	(void)state;
	for (int i = 0; i < KG_BACKEND_COUNT_; i++) {
		const struct kg_backend *b = kg_backend_get((enum kg_backend_id)i);
		assert_non_null(b);
		assert_int_equal(b->id, i);
		assert_string_equal(b->name, kg_backend_name((enum kg_backend_id)i));
		assert_string_equal(b->ext, kg_backend_ext((enum kg_backend_id)i));
		assert_non_null(b->sandbox_name);
		/* every backend builds a candidate, a compiled one or an interpreted one (whose build is
		 * kgate's builder: a ModelNew's extensions), and bounds the build */
		assert_non_null(b->compile_cmd);
		assert_true(b->compile_wall_s > 0);
		/* an interpreted candidate needs a module task (its constructor and parameters) */
		assert_true(!b->runner_script || b->module_tasks_only);
		assert_ptr_equal(kg_backend_find(b->name), b);
	}
	assert_null(kg_backend_get(KG_BACKEND_COUNT_));
	assert_null(kg_backend_find("opencl"));
	const struct kg_backend *cpu = kg_backend_get(KG_BACKEND_CPU), *cu = kg_backend_get(KG_BACKEND_CUDA);
	assert_false(cpu->needs_gpu);
	assert_null(cpu->probe);
	assert_true(cu->needs_gpu);
	assert_non_null(cu->probe);
	/* the CPU runner sees no device and no /proc; the CUDA one the driver's nodes, /proc for its
	 * thread names (opens read-only), /sys, and the driver's few extra calls */
	assert_null(cpu->devices);
	assert_int_equal(cpu->proc, KG_SB_PROC_DEFAULT);
	assert_null(cpu->syscalls);
	assert_string_equal(cu->devices[0], "/dev/nvidia*");
	assert_int_equal(cu->proc, KG_SB_PROC_RW);
	assert_true(cu->readonly_opens);
	/* the torch runner: a Python script, read-only opens, no GPU, candidates for module tasks */
	const struct kg_backend *th = kg_backend_get(KG_BACKEND_TORCH);
	assert_string_equal(th->runner_script, "torch_runner.py");
	assert_true(th->module_tasks_only && th->readonly_opens && !th->needs_gpu);
	assert_false(cpu->module_tasks_only || cu->module_tasks_only);
	assert_int_equal(th->proc, KG_SB_PROC_RO);
	assert_non_null(th->syscalls);
	assert_true(cu->sys_ro);
	int epoll = 0;
	for (const char *const *s = cu->syscalls; *s; s++)
		epoll |= !strcmp(*s, "epoll_wait");
	assert_true(epoll);
	/* torch on the GPU: the same backend (id, name, builder, module tasks) in the CUDA runner's
	 * sandbox, its Python applying the run filter itself once CUDA is up; never in the table */
	const struct kg_backend *td = kg_backend_torch_device();
	assert_int_equal(td->id, KG_BACKEND_TORCH);
	assert_string_equal(td->name, "torch");
	assert_string_equal(td->ext, ".py");
	assert_true(td->needs_gpu && td->module_tasks_only && td->script_filters_itself);
	assert_string_equal(td->runner_script, "torch_runner.py");
	assert_ptr_equal(td->compile_cmd, th->compile_cmd);
	assert_string_equal(td->devices[0], "/dev/nvidia*");
	assert_int_equal(td->proc, KG_SB_PROC_RW);
	assert_true(td->readonly_opens && td->sys_ro && td->address_space_unbounded);
	assert_false(td->cpu_clock || td->data_bounded || th->script_filters_itself);
	assert_non_null(td->probe);
	assert_ptr_equal(kg_backend_find("torch"), th);
	assert_string_equal(td->sandbox_name, "run-torch-cuda");
}

/* a module that compiles kernels at run time gets a warm-up process ahead of its run */
static void test_warmup_words(void **state)
{
	(void)state;
	static const char tri[] = "import triton\nimport triton.language as tl\n";
	static const char comp[] = "self.f = torch.compile(self.f)\n";
	static const char plain[] = "import torch\nclass ModelNew: pass\n";
	assert_true(kg_warmup_needed(tri, sizeof(tri) - 1));
	assert_true(kg_warmup_needed(comp, sizeof(comp) - 1));
	assert_false(kg_warmup_needed(plain, sizeof(plain) - 1));
	/* the length bounds the search: a word past it is not there */
	assert_false(kg_warmup_needed(tri, 3));
}

static void test_imports(void **state)
{
	(void)state;
	const struct kg_backend *cpu = kg_backend_get(KG_BACKEND_CPU), *cu = kg_backend_get(KG_BACKEND_CUDA);
	assert_int_equal(kg_backend_symbol_verdict(cu, "cudaLaunchKernel"), 1);
	assert_int_equal(kg_backend_symbol_verdict(cu, "__cudaRegisterFatBinary"), 1);
	assert_int_equal(kg_backend_symbol_verdict(cpu, "cudaLaunchKernel"), 0);
	/* reaching outside the process: denied whatever the policy says */
	assert_int_equal(kg_backend_symbol_verdict(cu, "cudaIpcOpenMemHandle"), -1);
	assert_int_equal(kg_backend_symbol_verdict(cu, "cudaDeviceReset"), -1);
	assert_int_equal(kg_backend_symbol_verdict(cu, "cudaGetDriverEntryPointByVersion"), -1);
	assert_int_equal(kg_backend_symbol_verdict(cu, "cublasSgemm_v2"), 0);
	/* `static __thread` in a -fPIC object: the compiler's own call, on either backend and under
	 * any policy (examples/unusual/softmax_tls.c) */
	assert_int_equal(kg_backend_symbol_verdict(cpu, "__tls_get_addr"), 1);
	assert_int_equal(kg_backend_symbol_verdict(cu, "__tls_get_addr"), 1);
	assert_int_equal(kg_backend_symbol_verdict(cpu, "__tls_get_addr_x"), 0);
	assert_true(kg_backend_library_allowed(cu, "libcudart.so.13"));
	assert_false(kg_backend_library_allowed(cu, "libcublas.so.13"));
	assert_false(kg_backend_library_allowed(cpu, "libcudart.so.13"));
}

static void test_commands(void **state)
{
	(void)state;
	struct kg_compile_cmd *c = calloc(1, sizeof(*c));
	kg_error e = {0};
	const char *flags[] = {"-O3", "-ffast-math"};
	const char libs[1][32] = {"cublas"};
	struct kg_compile_req r = {.src_inside = "/work/kernel.c", .out_inside = "/work/kernel.so",
				   .include_inside = "/kgate/include", .flags = flags, .n_flags = 2};
	assert_int_equal(kg_backend_get(KG_BACKEND_CPU)->compile_cmd(c, &r, &e), 0);
	assert_int_equal(c->argv[c->argc], NULL);
	assert_true(has_arg(c, "-shared") > 0);
	assert_true(has_arg(c, "-I/kgate/include") > 0);
	int o = has_arg(c, "-o");
	assert_true(o > 0);
	assert_string_equal(c->argv[o + 1], "/work/kernel.so");
	/* the caller's flags come after kgate's own, so -o cannot be overridden by position */
	assert_true(has_arg(c, "-ffast-math") > o);
	assert_true(has_arg(c, "-lm") > 0);
	assert_string_equal(c->envp[0], "PATH=/usr/bin:/bin");

	r.src_inside = "/work/kernel.cu";
	r.arch = "90a";
	r.libs = libs;
	r.n_libs = 1;
	assert_int_equal(kg_backend_get(KG_BACKEND_CUDA)->compile_cmd(c, &r, &e), 0);
	assert_non_null(strstr(c->argv[0], "/bin/nvcc"));
	assert_true(has_arg(c, "-gencode=arch=compute_90a,code=sm_90a") > 0);
	int cudart = has_arg(c, "-cudart");
	assert_true(cudart > 0);
	assert_string_equal(c->argv[cudart + 1], "shared");
	assert_true(has_arg(c, "-lcublas") > has_arg(c, "/work/kernel.cu"));
	assert_non_null(strstr(c->envp[0], "/bin:/usr/bin:/bin"));

	/* a ModelNew module: kgate's builder under the torch runner's Python (where one is found),
	 * the policy's flags after the paths, the interpreter's calls in the compile filter, the
	 * builder's content and torch's version in the cache key */
	char py[4096];
	if (!kg_path_python(py, sizeof(py), NULL, 0)) {
		r.src_inside = "/work/kernel.py";
		r.n_libs = 0;
		int rc = kg_backend_get(KG_BACKEND_TORCH)->compile_cmd(c, &r, &e);
		if (rc == 0) {
			assert_string_equal(c->argv[0], py);
			assert_true(has_arg(c, "/work/kernel.py") > 0);
			assert_true(has_arg(c, "-ffast-math") > has_arg(c, "/work/kernel.so"));
			assert_non_null(strstr(c->script, "torch_build.py"));
			assert_non_null(c->tool_version);
			assert_non_null(c->syscalls);
		} else {
			assert_int_equal(rc, -ENOENT); /* no builder beside a runner in this tree */
		}
	}
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_imports),
		cmocka_unit_test(test_commands),
		cmocka_unit_test(test_warmup_words),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
