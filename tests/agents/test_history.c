/* Unit tests of the search's bookkeeping: SHA-256 (content addressing), history lines appended
 * and reloaded, a torn last line from a crash, an infrastructure error giving way to a real
 * verdict, round markers for resuming, the ranking of accepted candidates, history lines that
 * carry the report's own objects, and the task message built for a backend (and for a task given
 * as a PyTorch module: the module as the reference, ModelNew as the language). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agents/feedback.h"
#include "agents/search.h"
#include "kg_sha256.h"
#include "verifier/plan/resolve.h"

static void test_sha256(void **state)
{
	(void)state;
	char h[65];
	kg_sha256_hex("", 0, h);
	assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	kg_sha256_hex("abc", 3, h);
	assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes: two tail blocks */
	kg_sha256_hex(two, strlen(two), h);
	assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	char *mil = malloc(1000000);
	memset(mil, 'a', 1000000);
	kg_sha256_hex(mil, 1000000, h);
	assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(mil);
}

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kg-hist-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	kg_rmtree(dir);
	return 0;
}

static json_t *cand(int round, char c, const char *verdict, double speedup)
{
	char id[65];
	memset(id, c, 64);
	id[64] = '\0';
	json_t *j = json_pack("{s:s,s:i,s:i,s:s,s:s,s:[]}", "event", "candidate", "round", round, "idea", 0, "id", id,
			      "verdict", verdict, "reasons");
	/* timed: the report's timing object (docs/report.md), as kg_feedback_line copies it */
	if (speedup > 0)
		json_object_set_new(j, "timing",
				    json_pack("{s:f,s:{s:f},s:{s:f}}", "speedup", speedup, "candidate", "median_ms",
					      1.0 / speedup, "reference", "median_ms", 1.0));
	return j;
}

static void append(struct kg_history *h, json_t *j)
{
	kg_error e = {0};
	assert_int_equal(kg_history_append(h, j, &e), 0);
	json_decref(j);
}

static void test_append_reload_best(void **state)
{
	(void)state;
	struct kg_history h;
	kg_error e = {0};
	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	assert_int_equal(h.n, 0);
	append(&h, cand(1, 'a', "accepted", 1.5));
	append(&h, cand(1, 'b', "rejected", 0));
	append(&h, cand(1, 'c', "accepted", 3.0));
	append(&h, cand(1, 'd', "error", 0));
	append(&h, json_pack("{s:s,s:i}", "event", "round", "round", 1));
	append(&h, cand(2, 'e', "accepted", 0)); /* accepted, untimed: ranks after the timed ones */
	json_t *py = cand(2, 'f', "accepted", 2.0);
	json_object_set_new(py, "language", json_string("torch")); /* a ModelNew: winner.py */
	append(&h, py);
	kg_history_close(&h);

	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	assert_int_equal(h.n, 6);
	assert_int_equal(h.skipped, 0);
	assert_true(h.done[1]);
	assert_false(h.done[2]);
	char id[65];
	memset(id, 'b', 64);
	id[64] = '\0';
	assert_int_equal(kg_history_find(&h, id)->verdict, KG_REC_REJECTED);
	const struct kg_rec *best[4];
	assert_int_equal(kg_history_best(&h, best, 4), 4);
	assert_int_equal(best[0]->id[0], 'c');
	assert_int_equal(best[1]->id[0], 'f');
	assert_int_equal(best[2]->id[0], 'a');
	assert_int_equal(best[3]->id[0], 'e');
	assert_int_equal(kg_history_best(&h, best, 2), 2);
	assert_int_equal(best[1]->id[0], 'f');
	/* what each was verified as, from its line's "language" (none: cpu, as the first searches) */
	assert_int_equal(best[1]->backend, KG_BACKEND_TORCH);
	assert_int_equal(best[0]->backend, KG_BACKEND_CPU);

	/* An error verdict gives way to a real one; a second real verdict does not replace the first. */
	append(&h, cand(3, 'd', "accepted", 10.0));
	append(&h, cand(3, 'a', "rejected", 0));
	memset(id, 'd', 64);
	assert_int_equal(kg_history_find(&h, id)->verdict, KG_REC_ACCEPTED);
	memset(id, 'a', 64);
	assert_int_equal(kg_history_find(&h, id)->verdict, KG_REC_ACCEPTED);
	assert_int_equal(kg_history_best(&h, best, 1), 1);
	assert_int_equal(best[0]->id[0], 'd');
	kg_history_close(&h);
}

/* A history written before the lines kept the report's structure: its renamed timing fields are
 * not read (the record is untimed), and nothing breaks on them or on odd types. */
static void test_old_timing_untimed(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof(path), "%s/history.jsonl", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "{\"event\":\"candidate\",\"round\":1,\"idea\":0,\"id\":\"%064d\",\"verdict\":\"accepted\","
		   "\"reasons\":[],\"timing\":{\"median_ms\":0.5,\"reference_median_ms\":1.0,\"speedup\":2.0}}\n",
		1);
	fprintf(f, "{\"event\":\"candidate\",\"round\":1,\"idea\":0,\"id\":\"%064d\",\"verdict\":\"accepted\","
		   "\"reasons\":[],\"timing\":{\"candidate\":\"fast\",\"speedup\":\"2\"}}\n",
		2);
	fprintf(f, "{\"event\":\"candidate\",\"round\":1,\"idea\":0,\"id\":\"%064d\",\"verdict\":\"accepted\","
		   "\"reasons\":[],\"timing\":[1,2]}\n",
		3);
	fclose(f);
	struct kg_history h;
	kg_error e = {0};
	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	assert_int_equal(h.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(h.recs[i].verdict, KG_REC_ACCEPTED);
		assert_false(h.recs[i].timed);
		struct kg_pool p = {0};
		Kgate__V1__CandidateResult *m = kg_feedback_result(&p, &h.recs[i], dir, 0);
		assert_non_null(m);
		assert_false(m->timed);
		assert_null(m->timing);
		kg_pool_free(&p);
	}
	/* a timed record written now ranks before all of them */
	append(&h, cand(2, 'a', "accepted", 1.1));
	const struct kg_rec *best[1];
	assert_int_equal(kg_history_best(&h, best, 1), 1);
	assert_int_equal(best[0]->id[0], 'a');
	kg_history_close(&h);
}

static void test_torn_line(void **state)
{
	(void)state;
	struct kg_history h;
	kg_error e = {0};
	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	append(&h, cand(1, 'a', "accepted", 1.5));
	kg_history_close(&h);
	/* a crash in the middle of the next write */
	char path[128];
	snprintf(path, sizeof(path), "%s/history.jsonl", dir);
	int fd = open(path, O_WRONLY | O_APPEND);
	assert_true(write(fd, "{\"event\":\"candidate\",\"id\":\"bbbb", 31) == 31);
	close(fd);
	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	assert_int_equal(h.n, 1);
	assert_int_equal(h.skipped, 1);
	append(&h, cand(1, 'b', "rejected", 0));
	kg_history_close(&h);
	/* the torn line was ended, so the next line is whole */
	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	assert_int_equal(h.n, 2);
	assert_int_equal(h.skipped, 1);
	kg_history_close(&h);
}

static void test_atomic_write(void **state)
{
	(void)state;
	char path[128];
	kg_error e = {0};
	char *text = NULL;
	snprintf(path, sizeof(path), "%s/winner.c", dir);
	assert_int_equal(kg_write_atomic(path, "one", 3, &e), 0);
	assert_int_equal(kg_write_atomic(path, "two!", 4, &e), 0);
	assert_int_equal(kg_read_file(path, 100, &text, NULL, &e), 0);
	assert_string_equal(text, "two!");
	free(text);
	snprintf(path, sizeof(path), "%s/no/such/dir/x", dir);
	assert_true(kg_write_atomic(path, "x", 1, &e) < 0);
}

static void test_feedback_line(void **state)
{
	(void)state;
	const char *report = "{\"verdict\":\"rejected\",\"exit_code\":1,\"reasons\":[{\"code\":\"check.input_modified\","
			     "\"message\":\"x changed\",\"input_class\":\"normal\",\"index\":3,\"expected\":1.0,\"got\":0.0}],"
			     "\"compile_log\":\"\"}";
	json_t *l = kg_feedback_line(report, NULL, 0);
	assert_string_equal(json_string_value(json_object_get(l, "verdict")), "rejected");
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(l, "reasons"), 0), "code")),
			    "check.input_modified");
	assert_null(json_object_get(l, "timing"));
	/* and back into the message the agent sees */
	json_object_set_new(l, "id", json_string("0123456789012345678901234567890123456789012345678901234567890123"));
	struct kg_rec r = {.round = 2, .verdict = KG_REC_REJECTED, .j = l};
	snprintf(r.id, sizeof(r.id), "%s", json_string_value(json_object_get(l, "id")));
	struct kg_pool p = {0};
	Kgate__V1__CandidateResult *m = kg_feedback_result(&p, &r, dir, 0);
	assert_non_null(m);
	assert_int_equal(m->verdict, KGATE__V1__VERDICT__VERDICT_REJECTED);
	assert_int_equal(m->n_reasons, 1);
	assert_int_equal(m->reasons[0]->index, 3);
	assert_true(m->reasons[0]->has_values);
	assert_true(m->reasons[0]->expected == 1.0);
	kg_pool_free(&p);
	json_decref(l);
	l = kg_feedback_line(NULL, "worker killed by SIGKILL", 0);
	assert_string_equal(json_string_value(json_object_get(l, "verdict")), "error");
	assert_string_equal(json_string_value(json_object_get(l, "error")), "worker killed by SIGKILL");
	assert_int_equal(json_integer_value(json_object_get(l, "exit_code")), 3);
	json_decref(l);
	l = kg_feedback_line(NULL, "no such task", 1);
	assert_int_equal(json_integer_value(json_object_get(l, "exit_code")), 2);
	json_decref(l);
	/* a report without an exit code accepts nothing */
	l = kg_feedback_line("{\"verdict\":\"accepted\",\"reasons\":[]}", NULL, 0);
	assert_string_equal(json_string_value(json_object_get(l, "verdict")), "error");
	assert_int_equal(json_integer_value(json_object_get(l, "exit_code")), 3);
	json_decref(l);
	/* without a verdict word, the exit code's */
	l = kg_feedback_line("{\"exit_code\":0}", NULL, 0);
	assert_string_equal(json_string_value(json_object_get(l, "verdict")), "accepted");
	assert_int_equal(json_array_size(json_object_get(l, "reasons")), 0);
	json_decref(l);
}

/* An accepted, timed report: the line carries its verdict, exit_code, reasons, timing,
 * compile_log and error exactly as the report has them, and nothing else of it; the record and
 * the agent's Timing message are read from the report's own field names. */
static void test_feedback_line_verbatim(void **state)
{
	(void)state;
	const char *report =
		"{\"kgate_report\":1,\"verdict\":\"accepted\",\"exit_code\":0,\"task\":\"softmax\",\"reasons\":[],"
		"\"checks\":[{\"name\":\"compile\",\"status\":\"pass\"}],\"compile_log\":\"warning: unused\","
		"\"timing\":{\"candidate\":{\"n\":20,\"median_ms\":0.25,\"p10_ms\":0.24,\"p90_ms\":0.3,\"min_ms\":0.2,"
		"\"max_ms\":0.4,\"spread\":0.1},\"reference\":{\"n\":20,\"median_ms\":1.0,\"p10_ms\":0.9,\"p90_ms\":1.1,"
		"\"min_ms\":0.9,\"max_ms\":1.2,\"spread\":0.05},\"parent_median_ms\":0.26,\"speedup\":4.0,\"bytes\":8e6,"
		"\"flops\":5e6,\"gbps\":32.0,\"gflops\":20.0,\"ceiling_gbps\":64.0,\"roofline\":0.5},"
		"\"durations\":{\"total_s\":1.5}}";
	json_t *rep = json_loads(report, 0, NULL);
	json_t *l = kg_feedback_line(report, NULL, 0);
	assert_non_null(rep);
	assert_non_null(l);
	static const char *const same[] = {"verdict", "exit_code", "reasons", "timing", "compile_log"};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		assert_true(json_equal(json_object_get(l, same[i]), json_object_get(rep, same[i])));
	assert_int_equal(json_object_size(l), 5);
	assert_null(json_object_get(l, "checks"));
	assert_null(json_object_get(l, "durations"));

	/* through the history file and back */
	json_object_set_new(l, "event", json_string("candidate"));
	json_object_set_new(l, "id", json_string("abababababababababababababababababababababababababababababababab"));
	json_object_set_new(l, "round", json_integer(1));
	struct kg_history h;
	kg_error e = {0};
	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	append(&h, l);
	kg_history_close(&h);
	assert_int_equal(kg_history_open(&h, dir, &e), 0);
	assert_int_equal(h.n, 1);
	const struct kg_rec *r = &h.recs[0];
	assert_int_equal(r->verdict, KG_REC_ACCEPTED);
	assert_true(r->timed);
	assert_true(r->speedup == 4.0);
	assert_true(r->median_ms == 0.25);
	assert_true(json_equal(json_object_get(r->j, "timing"), json_object_get(rep, "timing")));
	struct kg_pool p = {0};
	Kgate__V1__CandidateResult *m = kg_feedback_result(&p, r, dir, 0);
	assert_non_null(m);
	assert_true(m->timed);
	assert_true(m->timing->median_ms == 0.25);
	assert_true(m->timing->reference_median_ms == 1.0);
	assert_true(m->timing->speedup == 4.0);
	assert_true(m->timing->gbps == 32.0);
	assert_true(m->timing->gflops == 20.0);
	assert_true(m->timing->roofline == 0.5);
	assert_string_equal(m->compile_log, "warning: unused");
	kg_pool_free(&p);
	kg_history_close(&h);
	json_decref(rep);
}

/* The task message for each backend: both references, and the backend's language; a history
 * line's "language" word maps back to the same Language. */
static void test_feedback_task(void **state)
{
	(void)state;
	struct kg_task t;
	kg_error e = {0};
	assert_int_equal(kg_resolve_task("softmax", &t, &e), 0);
	assert_int_equal(kg_feedback_language(KG_BACKEND_CPU), KGATE__V1__LANGUAGE__LANGUAGE_C);
	assert_int_equal(kg_feedback_language(KG_BACKEND_CUDA), KGATE__V1__LANGUAGE__LANGUAGE_CUDA);
	assert_int_equal(kg_feedback_language(KG_BACKEND_TORCH), KGATE__V1__LANGUAGE__LANGUAGE_PYTHON);
	assert_int_equal(kg_feedback_language(KG_BACKEND_COUNT_), KGATE__V1__LANGUAGE__LANGUAGE_UNSPECIFIED);
	for (int i = 0; i < KG_BACKEND_COUNT_; i++) {
		const struct kg_backend *be = kg_backend_get((enum kg_backend_id)i);
		struct kg_pool p = {0};
		Kgate__V1__Task *m = kg_feedback_task(&p, &t, be, "nominal", 1, NULL);
		assert_non_null(m);
		assert_int_equal(m->language, kg_feedback_language(be->id));
		assert_non_null(strstr(m->reference_source, "kg_forward"));
		assert_non_null(strstr(m->reference_cuda, "kg_forward"));
		assert_string_equal(m->abi_header, "");
		json_t *line = json_pack("{s:s,s:s,s:[]}", "language", be->ref_key, "verdict", "rejected", "reasons");
		struct kg_rec r = {.verdict = KG_REC_REJECTED, .j = line};
		Kgate__V1__CandidateResult *c = kg_feedback_result(&p, &r, dir, 0);
		assert_non_null(c);
		assert_int_equal(c->language, m->language);
		json_decref(line);
		kg_pool_free(&p);
	}
}

/* A task given as a PyTorch module (its path is the module, as kg_torch_task_load leaves it): the
 * module is the reference, there is no task.yaml to send, and a torch search asks for Python. */
static void test_feedback_module_task(void **state)
{
	(void)state;
	static struct kg_task t;
	memset(&t, 0, sizeof(t));
	char *abs = realpath("tests/data/kernelbench/softmax.py", NULL);
	assert_non_null(abs);
	snprintf(t.name, sizeof(t.name), "softmax");
	snprintf(t.path, sizeof(t.path), "%s", abs);
	snprintf(t.ref[KG_BACKEND_TORCH], sizeof(t.ref[KG_BACKEND_TORCH]), "%s", abs);
	free(abs);
	struct kg_pool p = {0};
	Kgate__V1__Task *m = kg_feedback_task(&p, &t, kg_backend_get(KG_BACKEND_TORCH), "nominal", 0, NULL);
	assert_non_null(m);
	assert_int_equal(m->language, KGATE__V1__LANGUAGE__LANGUAGE_PYTHON);
	assert_non_null(strstr(m->reference_source, "class Model(nn.Module)"));
	assert_string_equal(m->manifest, "");
	assert_string_equal(m->reference_cuda, "");
	/* the same task searched with C candidates: still the module as the reference */
	m = kg_feedback_task(&p, &t, kg_backend_get(KG_BACKEND_CPU), "nominal", 0, NULL);
	assert_non_null(m);
	assert_int_equal(m->language, KGATE__V1__LANGUAGE__LANGUAGE_C);
	assert_non_null(strstr(m->reference_source, "def get_inputs"));
	kg_pool_free(&p);
}

static void test_timing_only(void **state)
{
	(void)state;
	assert_true(kg_feedback_timing_only("{\"exit_code\":1,\"reasons\":[{\"code\":\"timing.tampered\"}]}"));
	assert_true(kg_feedback_timing_only(
		"{\"exit_code\":1,\"reasons\":[{\"code\":\"timing.tampered\"},{\"code\":\"timing.tampered\"}]}"));
	assert_false(kg_feedback_timing_only(
		"{\"exit_code\":1,\"reasons\":[{\"code\":\"timing.tampered\"},{\"code\":\"check.mismatch\"}]}"));
	assert_false(kg_feedback_timing_only("{\"exit_code\":0,\"reasons\":[]}"));
	assert_false(kg_feedback_timing_only("{\"exit_code\":3,\"reasons\":[{\"code\":\"timing.tampered\"}]}"));
	assert_false(kg_feedback_timing_only("not json"));
	assert_false(kg_feedback_timing_only(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256),
		cmocka_unit_test_setup_teardown(test_append_reload_best, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_timing_untimed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_atomic_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feedback_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feedback_line_verbatim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feedback_task, setup, teardown),
		cmocka_unit_test(test_feedback_module_task),
		cmocka_unit_test(test_timing_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
