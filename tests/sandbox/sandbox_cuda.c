/* A driver-like run spec (sb_test.h: devices, writable /proc, /sys, extra calls, read-only opens,
 * all as data) against the real driver: a runner-like helper creates its context, applies the
 * filter with the driver's fds, and must still allocate, copy, JIT-load and launch; what a
 * candidate must not do afterwards is reported by name. Skipped (77) without an NVIDIA device. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sb_test.h"

#define PROBE SB_HELPERS_INSIDE "/cuda-probe"

static void run_probe(const char *misdeed, struct sb_run *r)
{
	const char *argv[] = {PROBE, misdeed, NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec_kind(&s, paths, SB_DRIVER, argv);
	s.seccomp_deferred = 1;
	s.allow_threads = 1;
	s.limits.wall_s = 60;
	sb_run_spec(&s, r);
}

static void test_kernel_after_apply(void **state)
{
	(void)state;
	struct sb_run r;
	run_probe(NULL, &r);
	assert_int_equal(r.rc, 0);
	if (r.o.end != KG_SB_END_EXIT || r.o.exit_code)
		fail_msg("probe: %s %s\n%s", r.o.syscall, r.o.detail, r.out);
	assert_non_null(strstr(r.out, "PROBE kernel ok"));
	assert_non_null(strstr(r.out, "PROBE done"));
	sb_run_free(&r);
}

static void test_denials_after_apply(void **state)
{
	(void)state;
	struct sb_run r;
	run_probe("socket", &r);
	assert_int_equal(r.o.end, KG_SB_END_SYSCALL);
	assert_string_equal(r.o.syscall, "socket");
	assert_non_null(strstr(r.o.detail, "the run-cuda filter"));
	sb_run_free(&r);
	run_probe("procmem", &r);
	assert_int_equal(r.o.end, KG_SB_END_SYSCALL);
	assert_string_equal(r.o.syscall, "openat");
	sb_run_free(&r);
}

int main(void)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (access("/dev/nvidiactl", R_OK | W_OK) || !lib) {
		printf("no NVIDIA device or libcuda here\n");
		return 77;
	}
	dlclose(lib);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_after_apply),
		cmocka_unit_test(test_denials_after_apply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
