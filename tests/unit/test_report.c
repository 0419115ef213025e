/* Unit tests of the report renderers: JSON fields and non-finite numbers, SARIF 2.1.0 structure
 * (one result per reason, one rule per code), JUnit (one testcase per check, escaping), text, and
 * hostile text (control bytes, invalid UTF-8, invisible characters) escaped in each. */
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

#include "verifier/report/report.h"

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
	v->acc.n = 2;
	v->acc.effective_bits = 13.7;
	v->acc.normwise_res = 7.5e-5;
	v->acc.factor_max = 1.1e-4;
	snprintf(v->acc.bits_class, sizeof(v->acc.bits_class), "normal");
	snprintf(v->acc.bits_shape, sizeof(v->acc.bits_shape), "R=8 C=65536");
	snprintf(v->acc.bits_tensor, sizeof(v->acc.bits_tensor), "y");
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
	/* the output's effective precision, and where the fewest bits were kept */
	json_t *prec = json_object_get(root, "precision");
	assert_non_null(prec);
	assert_true(json_real_value(json_object_get(prec, "effective_bits")) == 13.7);
	assert_true(json_real_value(json_object_get(prec, "normwise_error")) == 7.5e-5);
	assert_true(json_real_value(json_object_get(prec, "row_factor_max")) == 1.1e-4);
	assert_string_equal(json_string_value(json_object_get(prec, "shape")), "R=8 C=65536");
	json_decref(root);
	unlink(p);
	kg_verdict_free(&v);
}

/* The baselines block: a timed row with its spread, batch and how it was timed, one not timed with
 * why, and the quoted one by name; in JSON and in the SARIF run's properties alike. */
static void add_baselines(struct kg_verdict *v)
{
	v->n_baselines = 3;
	struct kg_baseline *b = &v->baselines[0];
	snprintf(b->name, sizeof(b->name), "reference");
	b->timed = 1;
	b->median_ms = 1.3;
	snprintf(b->how, sizeof(b->how), "kgate's cuda reference");
	b = &v->baselines[1];
	snprintf(b->name, sizeof(b->name), "eager");
	b->timed = 1;
	b->median_ms = 1.05;
	b->speedup = 0.83;
	b->spread = 0.004;
	b->n = 7;
	b->batch = 21;
	snprintf(b->how, sizeof(b->how), "torch 2.11.0 eager \x1b[31m");
	b = &v->baselines[2];
	snprintf(b->name, sizeof(b->name), "compile");
	snprintf(b->status, sizeof(b->status), "unavailable: torch 1.13.0 has no torch.compile");
	v->best_baseline = 1;
}

static void check_baselines(json_t *bl, json_t *best)
{
	assert_int_equal(json_array_size(bl), 3);
	json_t *eager = json_array_get(bl, 1);
	assert_true(json_is_true(json_object_get(eager, "timed")));
	assert_true(json_real_value(json_object_get(eager, "spread")) == 0.004);
	assert_int_equal(json_integer_value(json_object_get(eager, "batch")), 21);
	assert_int_equal(json_integer_value(json_object_get(eager, "n")), 7);
	/* a runner's words are escaped like any other */
	assert_string_equal(json_string_value(json_object_get(eager, "how")), "torch 2.11.0 eager \\x1b[31m");
	json_t *comp = json_array_get(bl, 2);
	assert_true(json_is_false(json_object_get(comp, "timed")));
	assert_true(json_is_null(json_object_get(comp, "median_ms")));
	assert_null(json_object_get(comp, "spread"));
	assert_non_null(strstr(json_string_value(json_object_get(comp, "status")), "no torch.compile"));
	assert_string_equal(json_string_value(best), "eager");
}

static void test_baselines(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_verdict(&v);
	add_baselines(&v);
	char *p = tmpfile_path(".json");
	char spec[128];
	snprintf(spec, sizeof(spec), "json:%s", p);
	assert_int_equal(kg_report_write(&v, spec, NULL), 0);
	json_error_t err;
	json_t *root = json_load_file(p, 0, &err);
	assert_non_null(root);
	check_baselines(json_object_get(root, "baselines"), json_object_get(root, "best_baseline"));
	json_decref(root);
	assert_int_equal(kg_report_sarif(&v, p, NULL), 0);
	root = json_load_file(p, 0, &err);
	assert_non_null(root);
	json_t *props = json_object_get(json_array_get(json_object_get(root, "runs"), 0), "properties");
	check_baselines(json_object_get(props, "baselines"), json_object_get(props, "best_baseline"));
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
	json_t *art = json_object_get(json_object_get(loc, "physicalLocation"), "artifactLocation");
	/* relative to the root (the current directory), percent-encoded, under SRCROOT */
	assert_string_equal(json_string_value(json_object_get(art, "uri")), "cand%3C%26%3E.c");
	assert_string_equal(json_string_value(json_object_get(art, "uriBaseId")), "SRCROOT");
	assert_non_null(json_object_get(json_object_get(run, "originalUriBaseIds"), "SRCROOT"));
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
	assert_null(strstr(x, "name=\"verdict\" time"));
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
	assert_non_null(strstr(x, "name=\"verdict\" time"));
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
	assert_non_null(strstr(t, "precision: 13.7 effective bits of fp32's 24 (norm-wise error 7.5e-05 after each "
				  "row's common factor (the largest 0.00011 from 1); class normal, R=8 C=65536, output y)"));
	unlink(p);
	kg_error e = {0};
	assert_int_not_equal(kg_report_write(&v, "pdf:x.pdf", &e), 0);
	assert_non_null(strstr(e.msg, "unknown report format"));
	assert_int_not_equal(kg_report_write(&v, "json", &e), 0);
	assert_int_not_equal(kg_report_write(&v, "json:/nonexistent/dir/x.json", &e), 0);
	/* a recorded rejection stands whatever fails after it (the error stays in the report)... */
	snprintf(v.internal_error, sizeof(v.internal_error), "no GPU");
	kg_verdict_finish(&v);
	assert_int_equal(v.exit_code, KG_EXIT_REJECTED);
	/* ...and an internal error without one is exit 3 */
	v.n_reasons = 0;
	kg_verdict_finish(&v);
	assert_int_equal(v.exit_code, KG_EXIT_INTERNAL);
	kg_verdict_free(&v);
}

/* A verdict whose candidate-controlled strings hold terminal escapes, a carriage return, invalid
 * UTF-8 (a lone continuation byte, an overlong '/', a truncated sequence) and a C1 CSI. */
static void make_hostile(struct kg_verdict *v)
{
	kg_verdict_init(v);
	snprintf(v->task, sizeof(v->task), "softmax");
	snprintf(v->candidate, sizeof(v->candidate), "k.c");
	snprintf(v->compile_log, sizeof(v->compile_log),
		 "/work/kernel.c:7:3: error: #error \x1b[2K\rverdict: ACCEPTED (exit 0)\xff\xfe\n"
		 "/work/kernel.c:12:9: error: second\xc0\xaf\n");
	kg_verdict_add_check(v, "static-imports", KG_CHECK_FAIL, 0, "1 forbidden \x1b[31m");
	struct kg_reason *r = kg_verdict_add_reason(v, KG_R_STATIC_FORBIDDEN_SYMBOL,
						    "the candidate imports '\x1b]0;owned\x07\x80\xe2\x82', bad");
	snprintf(r->tensor, sizeof(r->tensor), "sym\xc2\x9b" "1m\xff");
	kg_verdict_add_reason(v, KG_R_COMPILE_ERROR, "does not compile \r\x1b[1A");
	kg_verdict_finish(v);
}

static void no_raw_controls(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 && *p != '\n' && *p != '\t')
			fail_msg("raw control byte 0x%02x in: %.80s", *p, (const char *)p);
	assert_null(strstr(s, "\xc2\x9b"));
}

static void test_hostile_text(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_hostile(&v);
	assert_int_equal(v.exit_code, KG_EXIT_REJECTED);
	/* JSON: parses, the reasons are all there, nothing was dropped, a note says what was escaped */
	char *js = kg_report_json_string(&v);
	assert_non_null(js);
	json_error_t err;
	json_t *root = json_loads(js, 0, &err);
	assert_non_null(root);
	json_t *reasons = json_object_get(root, "reasons");
	assert_int_equal(json_array_size(reasons), 2);
	const char *m0 = json_string_value(json_object_get(json_array_get(reasons, 0), "message"));
	assert_non_null(strstr(m0, "\\x1b]0;owned\\x07\\x80\\xe2\\x82"));
	no_raw_controls(m0);
	assert_non_null(strstr(json_string_value(json_object_get(root, "compile_log")), "\\xff\\xfe"));
	assert_non_null(json_object_get(root, "notes"));
	json_decref(root);
	free(js);
	/* SARIF: every reason has results (compile.error: one per diagnostic, at its line and column) */
	char *p = tmpfile_path(".sarif");
	assert_int_equal(kg_report_sarif(&v, p, NULL), 0);
	root = json_load_file(p, 0, &err);
	assert_non_null(root);
	json_t *run = json_array_get(json_object_get(root, "runs"), 0);
	json_t *results = json_object_get(run, "results");
	assert_int_equal(json_array_size(results), 3);
	json_t *region = json_object_get(
		json_object_get(json_array_get(json_object_get(json_array_get(results, 2), "locations"), 0),
				"physicalLocation"),
		"region");
	assert_int_equal(json_integer_value(json_object_get(region, "startLine")), 12);
	assert_int_equal(json_integer_value(json_object_get(region, "startColumn")), 9);
	assert_non_null(json_object_get(json_object_get(run, "properties"), "compile_log"));
	json_decref(root);
	unlink(p);
	/* JUnit: no raw control byte and no invalid UTF-8 anywhere in the file */
	p = tmpfile_path(".xml");
	assert_int_equal(kg_report_junit(&v, p, NULL), 0);
	const char *x = slurp(p);
	no_raw_controls(x);
	assert_null(strstr(x, "\xff"));
	assert_non_null(strstr(x, "<system-out>"));
	assert_non_null(strstr(x, "type=\"static.forbidden_symbol\""));
	unlink(p);
	/* text: no ESC or CR, and the compile log's lines are marked as quoted */
	p = tmpfile_path(".txt");
	assert_int_equal(kg_report_text(&v, p, NULL), 0);
	x = slurp(p);
	no_raw_controls(x);
	assert_null(strstr(x, "\nverdict: ACCEPTED"));
	assert_non_null(strstr(x, "  | /work/kernel.c:7:3"));
	unlink(p);
	kg_verdict_free(&v);
}

/* Work that did not run is never a PASS: a verdict whose correctness and timing checks say PASS
 * though no trial ran and no call was timed (a phase that stopped before its first trial, a
 * check recorded by mistake) shows them as SKIP, "not run", in every format, and is not accepted
 * (kgate 0.2 printed "PASS correctness 0 trials" and accepted). */
static void test_nothing_ran_is_no_pass(void **state)
{
	(void)state;
	struct kg_verdict v;
	kg_verdict_init(&v);
	snprintf(v.task, sizeof(v.task), "softmax");
	snprintf(v.candidate, sizeof(v.candidate), "k.c");
	kg_verdict_add_check(&v, "compile", KG_CHECK_PASS, 0.1, "built");
	kg_verdict_add_check(&v, "static-imports", KG_CHECK_PASS, 0, "every import is on the policy's allowlist");
	kg_verdict_add_check(&v, "correctness", KG_CHECK_PASS, 0.2, "0 trials over 9 shapes");
	kg_verdict_add_check(&v, "timing", KG_CHECK_PASS, 0.0, "candidate median 0 ms");
	v.trials_run = 0;
	v.timed = 0;
	kg_verdict_finish(&v);
	assert_false(v.accepted);
	assert_int_equal(v.exit_code, KG_EXIT_INTERNAL);
	assert_non_null(strstr(v.internal_error, "not verified"));
	for (int i = 0; i < v.n_checks; i++)
		if (!strcmp(v.checks[i].name, "correctness") || !strcmp(v.checks[i].name, "timing")) {
			assert_int_equal(v.checks[i].status, KG_CHECK_SKIP);
			assert_non_null(strstr(v.checks[i].detail, "not run"));
		}
	char *p = tmpfile_path(".txt");
	assert_int_equal(kg_report_text(&v, p, NULL), 0);
	const char *t = slurp(p);
	assert_null(strstr(t, "PASS correctness"));
	assert_null(strstr(t, "PASS timing"));
	assert_non_null(strstr(t, "SKIP correctness"));
	assert_null(strstr(t, "ACCEPTED"));
	assert_non_null(strstr(t, "PASS compile")); /* what did run still says so */
	unlink(p);
	char *js = kg_report_json_string(&v);
	json_t *root = json_loads(js, 0, NULL);
	assert_non_null(root);
	json_t *checks = json_object_get(root, "checks");
	for (size_t i = 0; i < json_array_size(checks); i++) {
		const char *n = json_string_value(json_object_get(json_array_get(checks, i), "name"));
		const char *st = json_string_value(json_object_get(json_array_get(checks, i), "status"));
		if (!strcmp(n, "correctness") || !strcmp(n, "timing"))
			assert_string_equal(st, "skip");
	}
	assert_int_equal(json_integer_value(json_object_get(root, "trials")), 0);
	json_decref(root);
	free(js);
	p = tmpfile_path(".xml");
	assert_int_equal(kg_report_junit(&v, p, NULL), 0);
	t = slurp(p);
	assert_non_null(strstr(t, "skipped=\"2\""));
	unlink(p);
	kg_verdict_free(&v);

	/* trials ran and passed: PASS stays, and the verdict is accepted */
	kg_verdict_init(&v);
	kg_verdict_add_check(&v, "correctness", KG_CHECK_PASS, 0.2, "130 trials over 9 shapes");
	kg_verdict_add_check(&v, "timing", KG_CHECK_SKIP, 0, "no timed iterations requested");
	v.trials_run = 130;
	kg_verdict_finish(&v);
	assert_true(v.accepted);
	assert_int_equal(v.checks[0].status, KG_CHECK_PASS);
	assert_string_equal(v.checks[0].detail, "130 trials over 9 shapes");
	kg_verdict_free(&v);

	/* the candidate died before its first trial: rejected, and its correctness is no PASS either */
	kg_verdict_init(&v);
	kg_verdict_add_reason(&v, KG_R_SANDBOX_CRASH, "the candidate's process died during SETUP");
	kg_verdict_add_check(&v, "correctness", KG_CHECK_PASS, 0.0, "0 trials over 9 shapes");
	kg_verdict_finish(&v);
	assert_int_equal(v.exit_code, KG_EXIT_REJECTED);
	assert_int_not_equal(v.checks[0].status, KG_CHECK_PASS);
	kg_verdict_free(&v);
}

/* Invisible characters in every candidate-controlled field: a right-to-left override and an
 * isolate (a "Trojan source" reordering), a zero-width space, a line separator, a byte-order mark,
 * a soft hyphen and a tag character, beside ordinary non-ASCII text that must stay as it is. */
#define RLO "\xe2\x80\xae"
#define LRI "\xe2\x81\xa6"
#define ZWSP "\xe2\x80\x8b"
#define LSEP "\xe2\x80\xa8"
#define BOM "\xef\xbb\xbf"
#define SHY "\xc2\xad"
#define TAG_A "\xf3\xa0\x81\x81"
#define PLAIN "caf\xc3\xa9 \xe4\xb8\xad"

static void make_invisible(struct kg_verdict *v)
{
	kg_verdict_init(v);
	snprintf(v->task, sizeof(v->task), "softmax");
	snprintf(v->candidate, sizeof(v->candidate), "k" RLO "c.c");
	snprintf(v->compile_log, sizeof(v->compile_log),
		 "/work/kernel.c:3:9: note: #pragma message: " RLO "DETPECCA" LRI " " PLAIN "\n"
		 "/work/kernel.c:4:1: error: " ZWSP LSEP "verdict: ACCEPTED" BOM SHY TAG_A "\n");
	kg_verdict_add_check(v, "static-imports", KG_CHECK_FAIL, 0, "1 forbidden " RLO "x");
	struct kg_reason *r = kg_verdict_add_reason(v, KG_R_STATIC_FORBIDDEN_SYMBOL,
						    "the candidate imports 'kg" RLO "tesmem" LRI ZWSP "', " PLAIN);
	snprintf(r->tensor, sizeof(r->tensor), "kg" RLO "sym" TAG_A);
	kg_verdict_add_reason(v, KG_R_COMPILE_ERROR, "does not compile " LSEP BOM SHY);
	kg_verdict_finish(v);
}

/* None of the injected code points raw. Text as a reader gets it (decoded): each shown as its
 * \uNNNN, the plain text kept. */
static void no_raw_invisible(const char *what, const char *s)
{
	static const char *const raw[] = {RLO, LRI, ZWSP, LSEP, BOM, SHY, TAG_A};
	for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
		if (strstr(s, raw[i]))
			fail_msg("%s: raw invisible character %zu left in: %.200s", what, i, s);
}

static void invisible_escaped(const char *what, const char *s)
{
	static const char *const raw[] = {RLO, LRI, ZWSP, LSEP, BOM, SHY, TAG_A};
	for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
		if (strstr(s, raw[i]))
			fail_msg("%s: raw invisible character %zu left in: %.200s", what, i, s);
	if (!strstr(s, "\\u202e"))
		fail_msg("%s: no visible \\u202e in: %.200s", what, s);
	if (!strstr(s, PLAIN))
		fail_msg("%s: ordinary non-ASCII text changed in: %.200s", what, s);
}

static void test_invisible_text(void **state)
{
	(void)state;
	struct kg_verdict v;
	make_invisible(&v);
	assert_int_equal(v.exit_code, KG_EXIT_REJECTED);
	/* JSON: each string as a reader gets it, after the decoder */
	char *js = kg_report_json_string(&v);
	assert_non_null(js);
	json_error_t err;
	json_t *root = json_loads(js, 0, &err);
	assert_non_null(root);
	json_t *reasons = json_object_get(root, "reasons");
	const char *m0 = json_string_value(json_object_get(json_array_get(reasons, 0), "message"));
	invisible_escaped("json message", m0);
	assert_non_null(strstr(m0, "kg\\u202etesmem\\u2066\\u200b"));
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(reasons, 0), "tensor")),
			       "\\U000e0041"));
	assert_null(strstr(json_string_value(json_object_get(json_array_get(reasons, 1), "message")), LSEP));
	invisible_escaped("json compile_log", json_string_value(json_object_get(root, "compile_log")));
	assert_null(strstr(json_string_value(json_object_get(root, "candidate")), RLO));
	assert_non_null(json_object_get(root, "notes"));
	json_decref(root);
	no_raw_invisible("json text", js); /* JSON_ENSURE_ASCII: its own \u escapes say nothing */
	free(js);
	/* SARIF: the messages and the compile log */
	char *p = tmpfile_path(".sarif");
	assert_int_equal(kg_report_sarif(&v, p, NULL), 0);
	root = json_load_file(p, 0, &err);
	assert_non_null(root);
	json_t *run = json_array_get(json_object_get(root, "runs"), 0);
	const char *sm = json_string_value(json_object_get(
		json_object_get(json_array_get(json_object_get(run, "results"), 0), "message"), "text"));
	invisible_escaped("sarif message", sm);
	invisible_escaped("sarif compile_log",
			  json_string_value(json_object_get(json_object_get(run, "properties"), "compile_log")));
	json_decref(root);
	no_raw_invisible("sarif file", slurp(p));
	unlink(p);
	/* JUnit XML and the text summary: the files as written */
	p = tmpfile_path(".xml");
	assert_int_equal(kg_report_junit(&v, p, NULL), 0);
	invisible_escaped("junit", slurp(p));
	unlink(p);
	p = tmpfile_path(".txt");
	assert_int_equal(kg_report_text(&v, p, NULL), 0);
	const char *x = slurp(p);
	invisible_escaped("text", x);
	assert_non_null(strstr(x, "  | /work/kernel.c:4:1: error: \\u200b\\u2028verdict: ACCEPTED"));
	unlink(p);
	kg_verdict_free(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_sarif),
		cmocka_unit_test(test_baselines),
		cmocka_unit_test(test_junit),
		cmocka_unit_test(test_text_and_errors),
		cmocka_unit_test(test_hostile_text),
		cmocka_unit_test(test_invisible_text),
		cmocka_unit_test(test_nothing_ran_is_no_pass),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
