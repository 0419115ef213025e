/* Unit tests of the parsers' limits (common/kg_yaml.c, verifier/plan/task.c, policy/policy.c): a hostile
 * manifest or policy is a file:line error within a second, never minutes of work or a crash:
 * nesting depth (1 MB of '['), alias expansion, a second document, duplicate keys at every level,
 * duplicate dims and classes, task names that are not plain names (kgate 0.1 took over 20 minutes
 * on the nested '[' and silently took the rest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kg_yaml.h"
#include "policy/policy.h"
#include "verifier/plan/task.h"

static char dir[64];
static char *base; /* tasks/softmax/task.yaml */

static int setup(void **state)
{
	(void)state;
	const char *home = getenv("KGATE_HOME");
	char p[512];
	kg_error e = {0};
	snprintf(dir, sizeof(dir), "/tmp/kgate-test-limits-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(p, sizeof(p), "%s/tasks/softmax/task.yaml", home ? home : ".");
	if (kg_read_file(p, 1 << 20, &base, NULL, &e))
		return -1;
	snprintf(p, sizeof(p), "%s/reference.c", dir);
	kg_write_file(p, "/* empty */\n", 12, 0644, &e);
	snprintf(p, sizeof(p), "%s/reference.cu", dir);
	kg_write_file(p, "/* empty */\n", 12, 0644, &e);
	/* the manifest's torch baseline (baseline: torch:) beside the references */
	snprintf(p, sizeof(p), "%s/baseline.py", dir);
	return kg_write_file(p, "# empty\n", 8, 0644, &e);
}

static int teardown(void **state)
{
	(void)state;
	free(base);
	return kg_rmtree(dir);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Loads text as a task (or a policy) and asserts a fast error naming the file, the line when
 * given, and the words. */
static void refused(int policy, const char *text, size_t len, int line, const char *words)
{
	char p[256], want[300];
	kg_error e = {0};
	snprintf(p, sizeof(p), "%s/%s", dir, policy ? "policy.yaml" : "task.yaml");
	assert_int_equal(kg_write_file(p, text, len, 0644, &e), 0);
	double t0 = now();
	int rc;
	if (policy) {
		struct kg_policy *pol = calloc(1, sizeof(*pol));
		rc = kg_policy_load(p, pol, &e);
		free(pol);
	} else {
		struct kg_task *t = calloc(1, sizeof(*t));
		rc = kg_task_load(p, t, &e);
		free(t);
	}
	double dt = now() - t0;
	if (!rc)
		fail_msg("accepted: %.200s", text);
	if (dt > 1.0)
		fail_msg("%.2f s to reject (want < 1 s): %s", dt, e.msg);
	if (line)
		snprintf(want, sizeof(want), "%s:%d:", p, line);
	else
		snprintf(want, sizeof(want), "%s", p);
	if (!strstr(e.msg, want) || !strstr(e.msg, words))
		fail_msg("want '%s' and '%s' in: %s", want, words, e.msg);
}

/* The shipped softmax manifest with one line replaced (or text appended when from is NULL). */
static char *variant(const char *from, const char *to)
{
	size_t n = strlen(base) + strlen(to) + 2;
	char *s = malloc(n);
	const char *at = from ? strstr(base, from) : NULL;
	if (from)
		assert_non_null(at);
	if (!at)
		snprintf(s, n, "%s%s", base, to);
	else
		snprintf(s, n, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
	return s;
}

static void test_base_loads(void **state)
{
	(void)state;
	char p[256];
	kg_error e = {0};
	snprintf(p, sizeof(p), "%s/task.yaml", dir);
	kg_write_file(p, base, strlen(base), 0644, &e);
	struct kg_task *t = calloc(1, sizeof(*t));
	if (kg_task_load(p, t, &e))
		fail_msg("%s", e.msg);
	free(t);
}

static void test_nesting(void **state)
{
	(void)state;
	size_t n = 1 << 20;
	char *s = malloc(n);
	memset(s, '[', n);
	refused(0, s, n, 1, "nested deeper than");
	/* block nesting: a list of lists, 100 deep */
	kg_buf b = {0};
	kg_buf_printf(&b, "kgate_policy: 1\nsymbols:\n  extra:\n");
	for (int i = 0; i < 100; i++)
		kg_buf_printf(&b, "%*s- \n", 4 + 2 * i, "");
	refused(1, b.data, b.len, 0, "nested deeper than");
	kg_buf_free(&b);
	memset(s, '{', n);
	refused(1, s, n, 1, "a key must be a plain name"); /* {{: a mapping as a key */
	free(s);
}

static void test_aliases(void **state)
{
	(void)state;
	/* billion laughs: each level doubles nine times */
	kg_buf b = {0};
	kg_buf_printf(&b, "kgate_policy: 1\nx0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
	for (int i = 1; i < 10; i++)
		kg_buf_printf(&b, "x%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i - 1, i - 1,
			      i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
	refused(1, b.data, b.len, 0, "aliases");
	kg_buf_free(&b);
}

static void test_documents(void **state)
{
	(void)state;
	char *s = variant(NULL, "---\nkgate_task: 1\n");
	int line = 1;
	for (const char *c = base; *c; c++)
		line += *c == '\n';
	refused(0, s, strlen(s), line, "one YAML document");
	free(s);
}

static void test_duplicate_keys(void **state)
{
	(void)state;
	char *s = variant("  ci: {R: 64, C: 1000}", "  ci: {R: 64, C: 1000, R: 2}");
	refused(0, s, strlen(s), 8, "duplicate key 'R'");
	free(s);
	s = variant("  ci: {R: 64, C: 1000}", "  ci: {R: 64, C: 1000}\n  ci: {R: 2, C: 3}");
	refused(0, s, strlen(s), 9, "duplicate key 'ci'");
	free(s);
	s = variant("  - {name: x, dtype: f32, shape: [R, C]}", "  - {name: x, dtype: f32, shape: [R, C], dtype: f16}");
	refused(0, s, strlen(s), 0, "duplicate key 'dtype'");
	free(s);
	const char *pol = "kgate_policy: 1\ntiming:\n  warmup: 1\n  iterations: 2\n  warmup: 3\n";
	refused(1, pol, strlen(pol), 5, "duplicate key 'warmup'");
}

static void test_duplicate_lists(void **state)
{
	(void)state;
	char *s = variant("dims: [R, C]", "dims: [R, R, C]");
	refused(0, s, strlen(s), 5, "'R' twice");
	free(s);
	s = variant(NULL, "exclude_classes: [zeros, ones, zeros]\n");
	refused(0, s, strlen(s), 0, "'zeros' twice");
	free(s);
	const char *pol = "kgate_policy: 1\nclasses: [normal, large, normal]\n";
	refused(1, pol, strlen(pol), 2, "'normal' twice");
	pol = "kgate_policy: 1\ngpu: {compute_sanitizer: [memcheck, memcheck]}\n";
	refused(1, pol, strlen(pol), 2, "'memcheck' twice");
}

static void test_task_names(void **state)
{
	(void)state;
	static const char *const bad[] = {"../../evil", "a/b", "..", ".hidden", "a b", "x\\e[2K"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char line[64];
		snprintf(line, sizeof(line), "name: \"%s\"", bad[i]);
		char *s = variant("name: softmax", line);
		refused(0, s, strlen(s), 3, "plain name");
		free(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base_loads),	 cmocka_unit_test(test_nesting),
		cmocka_unit_test(test_aliases),		 cmocka_unit_test(test_documents),
		cmocka_unit_test(test_duplicate_keys), cmocka_unit_test(test_duplicate_lists),
		cmocka_unit_test(test_task_names),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
