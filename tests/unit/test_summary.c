/* Unit tests of the terminal summary's grouping (verifier/report/summary.c): a trial's finding repeated
 * at many shapes and classes shows once in full and once as a count line, every distinct code,
 * check and phase still shows in full, reasons about no shape are never folded, the shapes are
 * named by what differs, candidate-controlled text on the count line is escaped, and the JSON,
 * SARIF and JUnit reports keep every reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verifier/report/report.h"

/* A reason as trial.c records one: a code at a shape, the check that found it, the phase, the
 * first class and seed, the trials and the other classes. */
static struct kg_reason *trial(struct kg_verdict *v, enum kg_reason_code code, enum kg_reason_code found,
			       const char *where, const char *shape, const char *cls, int occ, const char *also,
			       const char *msg)
{
	struct kg_reason *r = kg_verdict_add_reason(v, code, "%s", msg);
	r->found = found;
	snprintf(r->where, sizeof(r->where), "%s", where);
	snprintf(r->shape, sizeof(r->shape), "%s", shape);
	snprintf(r->input_class, sizeof(r->input_class), "%s", cls);
	r->has_seed = 1;
	r->seed = 0x5eed;
	r->occurrences = occ;
	snprintf(r->also_classes, sizeof(r->also_classes), "%s", also);
	return r;
}

#define N_VARIANT 9 /* check.shape_variant (NaN) at nine shapes */
#define N_PASS 40   /* check.input_passthrough at forty: more shapes than the line names */

static void make_repeats(struct kg_verdict *v)
{
	kg_verdict_init(v);
	snprintf(v->task, sizeof(v->task), "softmax");
	snprintf(v->candidate, sizeof(v->candidate), "wrong.c");
	snprintf(v->backend, sizeof(v->backend), "cpu");
	kg_verdict_add_check(v, "compile", KG_CHECK_PASS, 0.1, "built");
	kg_verdict_add_check(v, "correctness", KG_CHECK_FAIL, 0.5, "150 trials over 9 shapes");
	struct kg_reason *r = trial(v, KG_R_CHECK_NAN, KG_R_CHECK_NAN, "after the call", "R=64 C=1000", "large", 6,
				    "spiked,mixed", "after the call: output 'y': 31946 of 64000 NaN");
	snprintf(r->tensor, sizeof(r->tensor), "y");
	snprintf(r->index_str, sizeof(r->index_str), "[0, 0]");
	r->has_values = 1;
	for (int i = 0; i < N_VARIANT; i++) {
		char shape[32], msg[128];
		snprintf(shape, sizeof(shape), "R=%d C=%d", i + 1, 100 + i);
		snprintf(msg, sizeof(msg), "at shape %s (not the base shape): after the call: variant number %d", shape, i);
		trial(v, KG_R_CHECK_SHAPE_VARIANT, KG_R_CHECK_NAN, "after the call", shape, i % 2 ? "large" : "spiked", 3,
		      i == 4 ? "special,mixed" : "mixed", msg);
	}
	/* the same code found by another check: its own kind, shown in full */
	trial(v, KG_R_CHECK_SHAPE_VARIANT, KG_R_CHECK_UNWRITTEN_OUTPUT, "after the call", "R=7 C=7", "normal", 1, "",
	      "at shape R=7 C=7 (not the base shape): after the call: output 'y' left unwritten");
	/* the same code in another phase: its own kind too */
	trial(v, KG_R_CHECK_STALE_RESULT, KG_R_CHECK_STALE_RESULT, "after the call", "R=64 C=1000", "normal", 1, "",
	      "stale after the call");
	trial(v, KG_R_CHECK_STALE_RESULT, KG_R_CHECK_STALE_RESULT, "during timing", "R=64 C=1000", "normal", 1, "",
	      "stale during timing");
	for (int i = 0; i < N_PASS; i++) {
		char shape[32], msg[128];
		snprintf(shape, sizeof(shape), "R=%d C=%d", 1000 + i, 2000 + i);
		snprintf(msg, sizeof(msg), "passthrough number %d", i);
		trial(v, KG_R_CHECK_INPUT_PASSTHROUGH, KG_R_CHECK_INPUT_PASSTHROUGH, "after the call", shape, "normal", 1,
		      i == 39 ? "uniform,large,tiny,zeros,ones,negative,special,identity,sorted,large_mean,spiked" : "",
		      msg);
	}
	/* findings about no shape: each its own, never folded */
	kg_verdict_add_reason(v, KG_R_STATIC_FORBIDDEN_SYMBOL, "the candidate imports 'pthread_create'");
	kg_verdict_add_reason(v, KG_R_STATIC_FORBIDDEN_SYMBOL, "the candidate imports 'dlopen'");
	kg_verdict_finish(v);
}

/* The summary as a string (caller frees). */
static char *summary(const struct kg_verdict *v)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(kg_report_text_file(v, f), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* The lines between the verdict and the checks: the reasons as a reader gets them. */
static int reason_lines(const char *t)
{
	const char *a = strstr(t, "\nverdict: "), *b = strstr(t, "\nchecks:");
	assert_non_null(a);
	assert_non_null(b);
	int n = 0;
	for (const char *p = a + 1; p < b; p++)
		n += *p == '\n';
	return n - 1;
}

static void test_grouped(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_repeats(&v);
	assert_int_equal(v.exit_code, KG_EXIT_REJECTED);
	char *t = summary(&v);
	/* the first of each kind in full, the rest not */
	assert_non_null(strstr(t, "after the call: output 'y': 31946 of 64000 NaN"));
	assert_non_null(strstr(t, "variant number 0"));
	for (int i = 1; i < N_VARIANT; i++) {
		char msg[32];
		snprintf(msg, sizeof(msg), "variant number %d", i);
		assert_null(strstr(t, msg));
	}
	assert_non_null(strstr(t, "passthrough number 0"));
	assert_null(strstr(t, "passthrough number 1"));
	/* one count line each: how many, the trials, the shapes and the classes */
	assert_non_null(strstr(t, "and 8 more like it (24 trials) at 8 more shapes (R=2 C=101; R=3 C=102; R=4 C=103; "
				  "R=5 C=104; R=6 C=105; R=7 C=106; R=8 C=107; R=9 C=108) under 4 input classes "
				  "(large,mixed,spiked,special); every one in the JSON report"));
	assert_non_null(strstr(t, "and 39 more like it at 39 more shapes (R=1001 C=2001; "));
	assert_non_null(strstr(t, "+"));
	assert_non_null(strstr(t, " more) under 12 input classes (normal,uniform,"));
	assert_int_equal(count(t, "more like it"), 2);
	/* every distinct code, check and phase shows in full */
	assert_non_null(strstr(t, "x check.nan "));
	assert_non_null(strstr(t, "output 'y' left unwritten"));
	assert_non_null(strstr(t, "stale after the call"));
	assert_non_null(strstr(t, "stale during timing"));
	assert_int_equal(count(t, "  x check.shape_variant "), 2);
	assert_int_equal(count(t, "  x check.stale_result "), 2);
	assert_int_equal(count(t, "  x check.input_passthrough "), 1);
	/* reasons about no shape are never folded */
	assert_non_null(strstr(t, "'pthread_create'"));
	assert_non_null(strstr(t, "'dlopen'"));
	assert_int_equal(count(t, "  x static.forbidden_symbol "), 2);
	/* 53 reasons on a screen */
	assert_int_equal(v.n_reasons, 1 + N_VARIANT + 3 + N_PASS + 2);
	assert_true(reason_lines(t) <= 25);
	free(t);
	kg_verdict_free(&v);
}

/* The shapes of a group named by the dims that change (the first instance names them all). */
static void test_compact_shapes(void **state)
{
	(void)state;
	struct kg_verdict v;
	kg_verdict_init(&v);
	static const char *const shapes[] = {"N=2 C=3 H=16 W=16 K=4", "N=2 C=3 H=35 W=40 K=4", "N=2 C=3 H=22 W=33 K=4",
					     "N=2 C=3 H=22 W=16 K=4"};
	for (int i = 0; i < 4; i++)
		trial(&v, KG_R_CHECK_CONSTANT_OUTPUT, KG_R_CHECK_CONSTANT_OUTPUT, "after the call", shapes[i], "tiny", 1, "",
		      "output 'y' is bit-identical for different inputs, and wrong");
	kg_verdict_finish(&v);
	char *t = summary(&v);
	assert_non_null(strstr(t, "shape N=2 C=3 H=16 W=16 K=4\n"));
	assert_non_null(strstr(t, "and 3 more like it at 3 more shapes (H=35 W=40; H=22 W=33; H=22 W=16) under 1 input "
				  "class (tiny);"));
	free(t);
	kg_verdict_free(&v);
}

/* What the count line quotes goes through the same escaping as every other line. */
static void test_count_line_escaped(void **state)
{
	(void)state;
	struct kg_verdict v;
	kg_verdict_init(&v);
	trial(&v, KG_R_CHECK_MISMATCH, KG_R_CHECK_MISMATCH, "after the call", "R=1", "normal", 1, "", "wrong");
	trial(&v, KG_R_CHECK_MISMATCH, KG_R_CHECK_MISMATCH, "after the call", "R=2\x1b[2K\rverdict: ACCEPTED",
	      "normal", 1, "zeros\x07\xe2\x80\xae", "wrong again");
	kg_verdict_finish(&v);
	char *t = summary(&v);
	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		if (*p < 0x20 && *p != '\n')
			fail_msg("raw control byte 0x%02x in: %.80s", *p, (const char *)p);
	assert_null(strstr(t, "\xe2\x80\xae"));
	assert_null(strstr(t, "\nverdict: ACCEPTED"));
	assert_non_null(strstr(t, "\\x1b[2K\\x0dverdict: ACCEPTED"));
	assert_non_null(strstr(t, "zeros\\x07\\u202e"));
	free(t);
	kg_verdict_free(&v);
}

static json_t *load(const char *path)
{
	json_error_t err;
	json_t *root = json_load_file(path, 0, &err);
	assert_non_null(root);
	return root;
}

/* The machine-read reports keep every reason, each with its own message. */
static void test_reports_keep_every_reason(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_repeats(&v);
	char *js = kg_report_json_string(&v);
	assert_non_null(js);
	json_t *root = json_loads(js, 0, NULL);
	assert_non_null(root);
	json_t *reasons = json_object_get(root, "reasons");
	assert_int_equal(json_array_size(reasons), (size_t)v.n_reasons);
	for (int i = 0; i < v.n_reasons; i++) {
		json_t *r = json_array_get(reasons, (size_t)i);
		assert_string_equal(json_string_value(json_object_get(r, "message")), v.reasons[i].message);
		assert_string_equal(json_string_value(json_object_get(r, "code")), kg_reason_name(v.reasons[i].code));
	}
	json_decref(root);
	free(js);
	char path[] = "/tmp/kgate-summary-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(kg_report_sarif(&v, path, NULL), 0);
	root = load(path);
	json_t *results = json_object_get(json_array_get(json_object_get(root, "runs"), 0), "results");
	assert_int_equal(json_array_size(results), (size_t)v.n_reasons);
	json_decref(root);
	assert_int_equal(kg_report_junit(&v, path, NULL), 0);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	static char x[1 << 16];
	x[fread(x, 1, sizeof(x) - 1, f)] = '\0';
	fclose(f);
	assert_non_null(strstr(x, "passthrough number 39"));
	assert_non_null(strstr(x, "variant number 8"));
	unlink(path);
	kg_verdict_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grouped),
		cmocka_unit_test(test_compact_shapes),
		cmocka_unit_test(test_count_line_escaped),
		cmocka_unit_test(test_reports_keep_every_reason),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
