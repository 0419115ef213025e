/* Unit tests of the report renderers: JSON fields and non-finite numbers, SARIF 2.1.0 structure
 * (one result per reason, one rule per code), JUnit (one testcase per check, escaping), text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verifier/verdict.h"

static void make_verdict(struct kg_verdict *v)
{
	kg_verdict_init(v);
	snprintf(v->task, sizeof(v->task), "softmax");
	snprintf(v->candidate, sizeof(v->candidate), "cand<&>.c");
	snprintf(v->backend, sizeof(v->backend), "cpu");
	v->master_seed = 0x1234;
	kg_verdict_add_check(v, "compile", KG_CHECK_PASS, 0.1, "built");
	kg_verdict_add_check(v, "correctness", KG_CHECK_FAIL, 0.5, "3 trials");
	kg_verdict_add_check(v, "timing", KG_CHECK_SKIP, 0, "skipped");
	struct kg_reason *r = kg_verdict_add_reason(v, KG_R_CHECK_MISMATCH, "output 'y' \"wrong\" <here> & there");
	snprintf(r->input_class, sizeof(r->input_class), "large");
	r->has_seed = 1;
	r->seed = 77;
	snprintf(r->tensor, sizeof(r->tensor), "y");
	r->index = 5;
	snprintf(r->index_str, sizeof(r->index_str), "[0, 5]");
	r->has_values = 1;
	r->expected = 1.5;
	r->got = NAN;
	r->occurrences = 3;
	snprintf(r->also_classes, sizeof(r->also_classes), "tiny,zeros");
	kg_verdict_add_reason(v, KG_R_CHECK_MISMATCH, "second at another shape");
	kg_verdict_add_reason(v, KG_R_SANDBOX_SYSCALL, "socket denied\x01");
	kg_verdict_finish(v);
}

static char *tmpfile_path(const char *suffix)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/kgate-report-XXXXXX%s", suffix);
	int fd = mkstemps(path, (int)strlen(suffix));
	assert_true(fd >= 0);
	close(fd);
	return path;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void test_json(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_verdict(&v);
	assert_int_equal(v.exit_code, KG_EXIT_REJECTED);
	char *p = tmpfile_path(".json");
	assert_int_equal(kg_report_write(&v, "json:/dev/null", NULL), 0);
	char spec[128];
	snprintf(spec, sizeof(spec), "json:%s", p);
	assert_int_equal(kg_report_write(&v, spec, NULL), 0);
	json_error_t err;
	json_t *root = json_load_file(p, 0, &err);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "verdict")), "rejected");
	assert_int_equal(json_integer_value(json_object_get(root, "exit_code")), 1);
	assert_string_equal(json_string_value(json_object_get(root, "seed")), "0x0000000000001234");
	json_t *reasons = json_object_get(root, "reasons");
	assert_int_equal(json_array_size(reasons), 3);
	json_t *r0 = json_array_get(reasons, 0);
	assert_string_equal(json_string_value(json_object_get(r0, "code")), "check.mismatch");
	assert_string_equal(json_string_value(json_object_get(r0, "got")), "nan");
	assert_true(json_real_value(json_object_get(r0, "expected")) == 1.5);
	assert_int_equal(json_integer_value(json_object_get(r0, "occurrences")), 3);
	assert_int_equal(json_array_size(json_object_get(r0, "also_classes")), 2);
	assert_int_equal(json_array_size(json_object_get(root, "checks")), 3);
	json_decref(root);
	unlink(p);
	kg_verdict_free(&v);
}

static void test_sarif(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_verdict(&v);
	char *p = tmpfile_path(".sarif");
	assert_int_equal(kg_report_sarif(&v, p, NULL), 0);
	json_error_t err;
	json_t *root = json_load_file(p, 0, &err);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "version")), "2.1.0");
	json_t *run = json_array_get(json_object_get(root, "runs"), 0);
	json_t *rules = json_object_get(json_object_get(json_object_get(run, "tool"), "driver"), "rules");
	assert_int_equal(json_array_size(rules), 2); /* check.mismatch once, sandbox.syscall */
	json_t *results = json_object_get(run, "results");
	assert_int_equal(json_array_size(results), 3);
	json_t *loc = json_array_get(json_object_get(json_array_get(results, 0), "locations"), 0);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(json_object_get(loc, "physicalLocation"), "artifactLocation"), "uri")),
			    "cand<&>.c");
	json_decref(root);
	unlink(p);
	kg_verdict_free(&v);
}

static void test_junit(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_verdict(&v);
	char *p = tmpfile_path(".xml");
	assert_int_equal(kg_report_junit(&v, p, NULL), 0);
	const char *x = slurp(p);
	assert_non_null(strstr(x, "tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""));
	assert_non_null(strstr(x, "&quot;wrong&quot; &lt;here&gt; &amp; there"));
	assert_null(strstr(x, "<here>"));
	assert_null(strchr(x, '\x01'));
	assert_null(strstr(x, "name=\"verdict\""));
	unlink(p);
	kg_verdict_free(&v);
	/* a rejection before any check ran (the candidate died while loading) still fails the suite */
	kg_verdict_init(&v);
	snprintf(v.task, sizeof(v.task), "softmax");
	kg_verdict_add_reason(&v, KG_R_SANDBOX_SYSCALL, "fork denied at load time");
	kg_verdict_finish(&v);
	assert_int_equal(kg_report_junit(&v, p, NULL), 0);
	x = slurp(p);
	assert_non_null(strstr(x, "tests=\"1\" failures=\"1\""));
	assert_non_null(strstr(x, "name=\"verdict\""));
	unlink(p);
	kg_verdict_free(&v);
}

static void test_text_and_errors(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_verdict(&v);
	char *p = tmpfile_path(".txt");
	assert_int_equal(kg_report_text(&v, p, NULL), 0);
	const char *t = slurp(p);
	assert_non_null(strstr(t, "verdict: REJECTED (exit 1)"));
	assert_non_null(strstr(t, "3 trials in all, also classes tiny,zeros"));
	unlink(p);
	kg_error e = {0};
	assert_int_not_equal(kg_report_write(&v, "pdf:x.pdf", &e), 0);
	assert_non_null(strstr(e.msg, "unknown report format"));
	assert_int_not_equal(kg_report_write(&v, "json", &e), 0);
	assert_int_not_equal(kg_report_write(&v, "json:/nonexistent/dir/x.json", &e), 0);
	/* an internal error outranks reasons */
	snprintf(v.internal_error, sizeof(v.internal_error), "no GPU");
	kg_verdict_finish(&v);
	assert_int_equal(v.exit_code, KG_EXIT_INTERNAL);
	kg_verdict_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_sarif),
		cmocka_unit_test(test_junit),
		cmocka_unit_test(test_text_and_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
