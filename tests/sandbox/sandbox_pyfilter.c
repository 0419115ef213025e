/* The run filter a Python runner applies itself (libkgate-filter.so, runner/pyfilter.c), as the
 * torch runner on a GPU does once CUDA is up: spawned with the sandbox's deny list alone
 * (seccomp_deferred), an interpreter loads the library with ctypes and applies the run profile;
 * its process then shows one more filter, the profile's denials are named (the listener reached the
 * supervisor), and a process it tries to start is refused and named. Without the library's call
 * nothing is applied, and the library refuses to run outside such a sandbox. Skipped where there is
 * no /usr/bin/python3 or no seccomp, and for the interpreter under a sanitizer build. */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sb_test.h"

/* BUILD/libkgate-filter.so, beside BUILD/tests */
static const char *filter_lib(void)
{
	static char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/../../libkgate-filter.so", sb_helpers_host());
	char *real = realpath(path, NULL);
	if (real) {
		snprintf(path, sizeof(path), "%s", real);
		free(real);
	}
	return path;
}

static const char code[] =
	"import ctypes, os, sys\n"
	"n = lambda: [l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp_filters')]\n"
	"print('before', n())\n"
	"if sys.argv[1] == 'apply':\n"
	"    err = ctypes.create_string_buffer(400)\n"
	"    rc = ctypes.CDLL(sys.argv[2]).kg_pyfilter_apply(err, ctypes.c_size_t(400))\n"
	"    print('applied', rc, err.value.decode())\n"
	"print('after', n())\n"
	"sys.stdout.flush()\n"
	"os.fork()\n"
	"print('forked')\n";

/* A sanitizer build's library needs its runtime first in the process: an interpreter has none */
static int usable(void)
{
	return !getenv("KGATE_SANITIZE") && !access("/usr/bin/python3", X_OK) && !access(filter_lib(), R_OK);
}

static void run_python(const char *mode, struct sb_run *r)
{
	const char *lib = filter_lib();
	const char *argv[] = {"/usr/bin/python3", "-I", "-B", "-c", code, mode, lib, NULL};
	struct kg_sb_path paths[3];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	paths[s.n_paths++] = (struct kg_sb_path){lib, NULL, KG_SB_PATH_EXEC};
	s.name = "run-python-deferred";
	s.seccomp_deferred = 1;
	s.allow_threads = 1;
	s.readonly_opens = 1;
	s.proc = KG_SB_PROC_RO;
	s.limits.address_space_unbounded = 1;
	sb_run_spec(&s, r);
}

static void test_applied(void **state)
{
	(void)state;
	if (!usable())
		skip();
	struct sb_run r;
	run_python("apply", &r);
	assert_int_equal(r.rc, 0);
	if (!(r.o.layers_active & KG_SB_LAYER_SECCOMP)) {
		sb_run_free(&r);
		skip();
	}
	/* the library applied the profile (one more filter than the deny list), which then refused the
	 * fork by name: the listener it handed over reached the supervisor */
	assert_non_null(strstr(r.out, "applied 0"));
	assert_non_null(strstr(r.out, "before ['1']"));
	assert_non_null(strstr(r.out, "after ['2']"));
	assert_null(strstr(r.out, "forked"));
	assert_int_equal(r.o.end, KG_SB_END_SYSCALL);
	assert_string_equal(r.o.syscall, "clone");
	sb_run_free(&r);
}

static void test_not_applied(void **state)
{
	(void)state;
	if (!usable())
		skip();
	/* without the call only the deny list holds: the fork goes through (which is why the parent
	 * checks the count before it loads anything of a candidate's) */
	struct sb_run r;
	run_python("skip", &r);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "after ['1']"));
	assert_non_null(strstr(r.out, "forked"));
	sb_run_free(&r);
}

/* outside a sandbox that left its filter to the program, the library applies nothing */
static void test_outside(void **state)
{
	(void)state;
	if (access(filter_lib(), R_OK))
		skip();
	unsetenv(KG_SB_ENV_NOTIFY_FD);
	unsetenv(KG_SB_ENV_FILTER);
	void *h = dlopen(filter_lib(), RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	int (*apply)(char *, size_t) = (int (*)(char *, size_t))dlsym(h, "kg_pyfilter_apply");
	assert_non_null(apply);
	char err[400];
	assert_int_equal(apply(err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not in a sandbox"));
	dlclose(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_applied),
		cmocka_unit_test(test_not_applied),
		cmocka_unit_test(test_outside),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
