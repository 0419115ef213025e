/* Unit tests of the compute-sanitizer glue: each tool's command line, and the reading of a report
 * (first error folded into one line, the summary kept, lines without our prefix ignored). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "verifier/session/compute_sanitizer.h"

static int has_arg(const char **argv, const char *a, const char *val)
{
	for (int i = 0; argv[i]; i++)
		if (!strcmp(argv[i], a))
			return !val || (argv[i + 1] && !strcmp(argv[i + 1], val));
	return 0;
}

static void test_argv(void **state)
{
	(void)state;
	const char *argv[KG_SANITIZER_MAX_ARGS];
	for (int t = 0; t < KG_SAN_COUNT_; t++) {
		int n = kg_sanitizer_argv((enum kg_sanitizer_tool)t, "/cuda/compute-sanitizer", "=P=", argv);
		assert_true(n < KG_SANITIZER_MAX_ARGS);
		assert_null(argv[n]);
		assert_string_equal(argv[0], "/cuda/compute-sanitizer");
		assert_true(has_arg(argv, "--tool", kg_sanitizer_tool_name((enum kg_sanitizer_tool)t)));
		assert_true(has_arg(argv, "--error-exitcode", KG_SANITIZER_ERROR_EXIT_STR));
		assert_true(has_arg(argv, "--prefix", "=P="));
		assert_true(has_arg(argv, "--check-exit-code", "no"));
		/* memcheck-only options go to memcheck alone (the others refuse them) */
		assert_int_equal(has_arg(argv, "--padding", NULL), t == KG_SAN_MEMCHECK);
		assert_int_equal(has_arg(argv, "--report-api-errors", "no"), t == KG_SAN_MEMCHECK);
	}
}

static const char report[] =
	"kernel says hi\n"
	"=kgate-1= COMPUTE-SANITIZER\n"
	"=kgate-0= Invalid __global__ write of size 4 bytes\n" /* forged: another prefix */
	"=kgate-1= Invalid __global__ read of size 4 bytes\n"
	"=kgate-1=     at softmax(const float *, float *, long long)+0x1f0\n"
	"=kgate-1=     by thread (0,0,0) in block (63,0,0)\n"
	"=kgate-1=     Access at 0x7f3c2e03e800 is out of bounds\n"
	"=kgate-1=     and is 1 bytes after the nearest allocation at 0x7f3c2e000000 of size 256000 bytes\n"
	"=kgate-1=     Device Frame: softmax+0x1f0\n"
	"=kgate-1= \n"
	"=kgate-1= Invalid __global__ read of size 4 bytes\n"
	"=kgate-1=     at softmax(const float *, float *, long long)+0x1f0\n"
	"noise =kgate-1= not at the start of a line\n"
	"=kgate-1= ERROR SUMMARY: 2 errors\n";

static void test_first_error(void **state)
{
	(void)state;
	char msg[600];
	kg_sanitizer_first_error(report, "=kgate-1=", msg, sizeof(msg));
	assert_string_equal(msg, "Invalid __global__ read of size 4 bytes; at softmax(const float *, float *, long long)"
				 "+0x1f0; by thread (0,0,0) in block (63,0,0); Access at 0x7f3c2e03e800 is out of "
				 "bounds; and is 1 bytes after the nearest allocation at 0x7f3c2e000000 of size 256000 "
				 "bytes (ERROR SUMMARY: 2 errors)");
	/* a short buffer truncates, never overruns */
	char small[40];
	kg_sanitizer_first_error(report, "=kgate-1=", small, sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	/* nothing behind the prefix: say so */
	kg_sanitizer_first_error("=kgate-0= Invalid read\n", "=kgate-1=", msg, sizeof(msg));
	assert_string_equal(msg, "(the report was not captured)");
	kg_sanitizer_first_error(NULL, "=kgate-1=", msg, sizeof(msg));
	assert_string_equal(msg, "(the report was not captured)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_argv),
		cmocka_unit_test(test_first_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
