/* The vocabulary tables: every name unique and round-tripping, every reason with its texts and a
 * known check, and the documentation listing exactly what the tables hold: README and kgate(1)
 * every reason code and no other, policy/SCHEMA.md and kgate-policy(5) every input class and
 * compute-sanitizer tool, and no document naming a reason code that does not exist. */
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kg_common.h"
#include "kg_vocab.h"

static void test_reasons(void **state)
{
	(void)state;
	for (int i = 0; i < KG_R_COUNT_; i++) {
		enum kg_reason_code c = (enum kg_reason_code)i, back;
		const char *n = kg_reason_name(c);
		assert_int_equal(kg_reason_parse(n, &back), 0);
		assert_int_equal(back, c);
		assert_non_null(strchr(n, '.'));
		assert_true(strlen(kg_reason_short(c)) > 10);
		assert_true(strlen(kg_reason_full(c)) >= strlen(kg_reason_short(c)) / 2);
		assert_true(kg_reason_exit(c) == KG_EXITCLASS_REJECTED || kg_reason_exit(c) == KG_EXITCLASS_INTERNAL);
		assert_true(strlen(kg_reason_check(c)) > 0);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(kg_reason_name((enum kg_reason_code)j), n);
	}
	enum kg_reason_code c;
	assert_int_equal(kg_reason_parse("check.nonsense", &c), -EINVAL);
	assert_int_equal(kg_reason_exit(KG_R_SANDBOX_SETUP), KG_EXITCLASS_INTERNAL);
	assert_int_equal(kg_reason_exit(KG_R_CHECK_MISMATCH), KG_EXITCLASS_REJECTED);
	assert_string_equal(kg_reason_check(KG_R_STATIC_FORBIDDEN_SYMBOL), "static-imports");
	assert_string_equal(kg_reason_check(KG_R_CHECK_STALE_RESULT), "timing");
	assert_string_equal(kg_reason_name(KG_R_COUNT_), "?");
}

static void test_classes_tools_backends(void **state)
{
	(void)state;
	for (int i = 0; i < KG_CLASS_COUNT_; i++) {
		enum kg_input_class c;
		assert_int_equal(kg_class_parse(kg_class_name((enum kg_input_class)i), &c), 0);
		assert_int_equal(c, i);
		assert_non_null(strstr(kg_class_names(), kg_class_name(c)));
	}
	assert_string_equal(kg_class_name(KG_CLASS_NORMAL), "normal");
	for (int i = 0; i < KG_SAN_COUNT_; i++) {
		enum kg_sanitizer_tool t;
		const char *n = kg_sanitizer_tool_name((enum kg_sanitizer_tool)i);
		assert_int_equal(kg_sanitizer_tool_parse(n, &t), 0);
		assert_int_equal(t, i);
		/* a tool's findings carry its own code: check.<tool> */
		char code[64];
		snprintf(code, sizeof(code), "check.%s", n);
		assert_string_equal(kg_reason_name(kg_sanitizer_tool_reason(t)), code);
	}
	assert_string_equal(kg_sanitizer_tool_names(), "memcheck, racecheck, synccheck, initcheck");
	enum kg_backend_id b;
	assert_int_equal(kg_backend_for_path("dir.x/kernel.cu", &b), 0);
	assert_int_equal(b, KG_BACKEND_CUDA);
	assert_int_equal(kg_backend_for_path("k.c", &b), 0);
	assert_int_equal(b, KG_BACKEND_CPU);
	assert_int_equal(kg_backend_for_path("dir.cu/kernel", &b), -EINVAL);
	assert_int_equal(kg_backend_parse("gpu", &b), -EINVAL);
	assert_string_equal(kg_backend_names(), "cpu, cuda, torch");
	assert_string_equal(kg_backend_ref_key(KG_BACKEND_CUDA), "cuda");
}

/* ---- the documentation ---- */

static char *doc(const char *rel)
{
	const char *home = getenv("KGATE_HOME");
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", home && *home ? home : ".", rel);
	char *text = NULL;
	kg_error e = {0};
	if (kg_read_file(path, 1u << 20, &text, NULL, &e))
		fail_msg("%s", e.msg);
	return text;
}

struct words {
	int n;
	char w[256][64];
};

static int has(const struct words *s, const char *w)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->w[i], w))
			return 1;
	return 0;
}

static void add(struct words *s, const char *w, size_t len)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%.*s", (int)len, w);
	if (!has(s, buf) && s->n < 256)
		snprintf(s->w[s->n++], sizeof(s->w[0]), "%s", buf);
}

/* Every match of re in text: its group 1 where re has a group, else the whole match. */
static void scan(const char *text, const char *re, struct words *out)
{
	regex_t rx;
	assert_int_equal(regcomp(&rx, re, REG_EXTENDED), 0);
	regmatch_t m[2];
	for (const char *p = text; !regexec(&rx, p, 2, m, p == text ? 0 : REG_NOTBOL); p += m[0].rm_eo) {
		int g = m[1].rm_so >= 0 ? 1 : 0;
		add(out, p + m[g].rm_so, (size_t)(m[g].rm_eo - m[g].rm_so));
		if (m[0].rm_eo == 0)
			break;
	}
	regfree(&rx);
}

static void scan_whole(const char *text, const char *re, struct words *out)
{
	regex_t rx;
	assert_int_equal(regcomp(&rx, re, REG_EXTENDED), 0);
	regmatch_t m[1];
	for (const char *p = text; !regexec(&rx, p, 1, m, p == text ? 0 : REG_NOTBOL) && m[0].rm_eo > 0;
	     p += m[0].rm_eo)
		add(out, p + m[0].rm_so, (size_t)(m[0].rm_eo - m[0].rm_so));
	regfree(&rx);
}

/* The policy keys of SCHEMA.md's table: dotted words like reason codes that are not reasons. */
static void policy_keys(struct words *keys)
{
	char *schema = doc("policy/SCHEMA.md");
	scan(schema, "\\| `([a-z_]+\\.[a-z_]+)`", keys);
	scan(schema, ", `([a-z_]+\\.[a-z_]+)` \\|", keys);
	free(schema);
}

/* no group: the whole dotted code is the word */
#define REASON_RE "\\b(compile|load|static|sandbox|check|timing)\\.[a-z_]*[a-z]"

static void reasons_in(const char *rel, struct words *found)
{
	char *text = doc(rel);
	struct words keys = {0}, all = {0};
	policy_keys(&keys);
	scan_whole(text, REASON_RE, &all);
	for (int i = 0; i < all.n; i++) {
		/* source files ("timing.c") share a prefix with codes; no code is one letter long */
		const char *dot = strchr(all.w[i], '.');
		if (strlen(dot + 1) == 1)
			continue;
		if (!has(&keys, all.w[i]))
			add(found, all.w[i], strlen(all.w[i]));
	}
	free(text);
}

static void expect_exactly_reasons(const char *rel)
{
	struct words found = {0};
	reasons_in(rel, &found);
	for (int i = 0; i < KG_R_COUNT_; i++)
		if (!has(&found, kg_reason_name((enum kg_reason_code)i)))
			fail_msg("%s does not list reason code %s", rel, kg_reason_name((enum kg_reason_code)i));
	for (int i = 0; i < found.n; i++) {
		enum kg_reason_code c;
		if (kg_reason_parse(found.w[i], &c))
			fail_msg("%s names %s, which is no reason code", rel, found.w[i]);
	}
}

static void test_docs_list_every_reason(void **state)
{
	(void)state;
	expect_exactly_reasons("README.md");
	expect_exactly_reasons("packaging/man/kgate.1");
	/* elsewhere a code may be mentioned, but only a real one */
	static const char *const others[] = {"policy/SCHEMA.md", "packaging/man/kgate-policy.5",
					     "packaging/man/kgate-task.5", "docs/report.md", "tasks/README.md"};
	for (size_t d = 0; d < KG_ARRAY_LEN(others); d++) {
		struct words found = {0};
		reasons_in(others[d], &found);
		for (int i = 0; i < found.n; i++) {
			enum kg_reason_code c;
			if (kg_reason_parse(found.w[i], &c))
				fail_msg("%s names %s, which is no reason code", others[d], found.w[i]);
		}
	}
}

/* The words of the one line of text that starts with `start`, matched by re. */
static void line_words(const char *text, const char *start, const char *re, struct words *out)
{
	const char *l = strstr(text, start);
	if (!l)
		fail_msg("no line starting with %s", start);
	const char *end = strchr(l, '\n');
	char *line = strndup(l, end ? (size_t)(end - l) : strlen(l));
	scan(line, re, out);
	free(line);
}

/* The man page's words matched by re between two markers. */
static void man_words(const char *text, const char *from, const char *to, const char *re, struct words *out)
{
	const char *a = strstr(text, from);
	if (!a)
		fail_msg("no %s in the man page", from);
	const char *b = strstr(a + strlen(from), to);
	char *part = strndup(a, b ? (size_t)(b - a) : strlen(a));
	scan(part, re, out);
	free(part);
}

static void expect_same(const char *what, const struct words *got, const char *(*name)(int), int n)
{
	for (int i = 0; i < n; i++)
		if (!has(got, name(i)))
			fail_msg("%s does not list %s", what, name(i));
	if (got->n != n)
		fail_msg("%s lists %d names, the table has %d", what, got->n, n);
}

static const char *class_at(int i)
{
	return kg_class_name((enum kg_input_class)i);
}

static const char *tool_at(int i)
{
	return kg_sanitizer_tool_name((enum kg_sanitizer_tool)i);
}

static void test_docs_list_every_class_and_tool(void **state)
{
	(void)state;
	char *schema = doc("policy/SCHEMA.md"), *man = doc("packaging/man/kgate-policy.5");
	struct words s_classes = {0}, s_tools = {0}, m_list = {0}, m_section = {0}, m_tools = {0};
	line_words(schema, "| `classes` |", "`([a-z_]+)`", &s_classes);
	/* the row's own key and the `normal` it requires are in the list already */
	struct words only = {0};
	for (int i = 0; i < s_classes.n; i++)
		if (strcmp(s_classes.w[i], "classes"))
			add(&only, s_classes.w[i], strlen(s_classes.w[i]));
	expect_same("policy/SCHEMA.md (classes)", &only, class_at, KG_CLASS_COUNT_);
	line_words(schema, "| `gpu.compute_sanitizer` |", "`([a-z]+check)`", &s_tools);
	expect_same("policy/SCHEMA.md (gpu.compute_sanitizer)", &s_tools, tool_at, KG_SAN_COUNT_);
	/* the key's list (".BR name ," lines), the section's entries (".TP" then ".B name") */
	man_words(man, ".BR classes ", "\n.TP", "\n\\.BR ([a-z_]+) [,;]", &m_list);
	expect_same("kgate-policy(5) classes", &m_list, class_at, KG_CLASS_COUNT_);
	man_words(man, ".SH INPUT CLASSES", "\n.PP", "\\.TP\n\\.B ([a-z_]+)", &m_section);
	expect_same("kgate-policy(5) INPUT CLASSES", &m_section, class_at, KG_CLASS_COUNT_);
	man_words(man, ".BR gpu.compute_sanitizer ", "\n.SH", "\n\\.BR? ([a-z]+check)", &m_tools);
	expect_same("kgate-policy(5) gpu.compute_sanitizer", &m_tools, tool_at, KG_SAN_COUNT_);
	free(schema);
	free(man);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reasons),
		cmocka_unit_test(test_classes_tools_backends),
		cmocka_unit_test(test_docs_list_every_reason),
		cmocka_unit_test(test_docs_list_every_class_and_tool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
