/* Unit tests of code and idea extraction from model answers: every fence style models produce,
 * several blocks, prose around them, CRLF, an answer cut off inside a fence, and look-alikes that
 * must not count (inline code, blocks in other languages, code that never defines kg_forward);
 * for a ModelNew search, Python blocks defining a top-level class ModelNew and nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugins/llm/llm.h"

#define FWD "int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream) { return 0; }\n"

static int extract(const char *text, char **out, int max)
{
	return kg_extract_candidates(text, KGATE__V1__LANGUAGE__LANGUAGE_C, out, max);
}

static int extract_py(const char *text, char **out, int max)
{
	return kg_extract_candidates(text, KGATE__V1__LANGUAGE__LANGUAGE_PYTHON, out, max);
}

#define MODELNEW                                                                                               \
	"import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
	"        return torch.softmax(x, dim=1)\n"

static void free_all(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
}

static void test_labels(void **state)
{
	(void)state;
	const char *labels[] = {"c", "cuda", "cpp", "C++", "", "cu", "{.c}", "c title=\"x.c\""};
	for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++) {
		char text[1024];
		snprintf(text, sizeof(text), "Here you go:\n```%s\n#include <kgate/kernel.h>\n" FWD "```\nDone.", labels[i]);
		char *out[4];
		assert_int_equal(extract(text, out, 4), 1);
		assert_non_null(strstr(out[0], "#include <kgate/kernel.h>\nint kg_forward"));
		assert_null(strstr(out[0], "```"));
		free_all(out, 1);
	}
}

static void test_several_and_others(void **state)
{
	(void)state;
	const char *text = "Idea A:\n```c\n// one\n" FWD "```\nand the JSON:\n```json\n{\"a\": 1}\n```\n"
			   "a shell line:\n```bash\nmake\n```\nIdea B:\n~~~cuda\n// two\n" FWD "~~~\n"
			   "a helper without the entry point:\n```c\nstatic int helper(void) { return 1; }\n```\n"
			   "a mention in a comment only:\n```c\n/* kg_forward is defined elsewhere */\n```\n"
			   "the first one again:\n```c\n// one\n" FWD "```\n";
	char *out[8];
	int n = extract(text, out, 8);
	assert_int_equal(n, 2);
	assert_non_null(strstr(out[0], "// one"));
	assert_non_null(strstr(out[1], "// two"));
	free_all(out, n);
	/* max is honoured */
	assert_int_equal(extract(text, out, 1), 1);
	free_all(out, 1);
}

static void test_crlf_indent_unterminated(void **state)
{
	(void)state;
	char *out[2];
	const char *crlf = "Sure.\r\n```c\r\n#include <kgate/kernel.h>\r\nint kg_forward (const kg_tensor *in, int n_in,\r\n"
			   "  kg_tensor *out, int n_out, void *stream)\r\n{ return 0; }\r\n```\r\n";
	assert_int_equal(extract(crlf, out, 2), 1);
	assert_null(strchr(out[0], '\r'));
	assert_non_null(strstr(out[0], "{ return 0; }\n"));
	free_all(out, 1);
	/* indented up to three spaces, a longer closing fence, trailing blanks after it */
	const char *ind = "   ````c\n" FWD "   ``````   \nafter\n";
	assert_int_equal(extract(ind, out, 2), 1);
	assert_null(strstr(out[0], "after"));
	free_all(out, 1);
	/* the answer ran out of tokens inside the fence: the code so far is still a candidate */
	const char *cut = "Here:\n```c\n#include <kgate/kernel.h>\n" FWD "// trailing";
	struct kg_code_block *b;
	int nb;
	assert_int_equal(kg_extract_blocks(cut, &b, &nb), 0);
	assert_int_equal(nb, 1);
	assert_int_equal(b[0].terminated, 0);
	kg_free_blocks(b, nb);
	assert_int_equal(extract(cut, out, 2), 1);
	assert_non_null(strstr(out[0], "// trailing"));
	free_all(out, 1);
	/* a shorter fence or a fence with text after it does not close */
	const char *inner = "````c\n" FWD "```\nstill code\n```c not a close\n````\n";
	assert_int_equal(extract(inner, out, 2), 1);
	assert_non_null(strstr(out[0], "still code"));
	free_all(out, 1);
}

static void test_no_fence_and_lookalikes(void **state)
{
	(void)state;
	char *out[2];
	/* no fence at all: the whole answer, if it is a source file */
	assert_int_equal(extract("#include <kgate/kernel.h>\n" FWD, out, 2), 1);
	free_all(out, 1);
	assert_int_equal(extract("I would call kg_forward(...) with a faster loop.", out, 2), 0);
	/* inline code with backticks is not a fence; nor is a 4-space indent */
	assert_int_equal(extract("Use ```kg_forward(x)``` here.\n", out, 2), 0);
	assert_int_equal(extract("    ```c\n" FWD "    ```\n", out, 2), 0);
	/* identifiers that merely end in kg_forward */
	assert_int_equal(extract("```c\nint my_kg_forward(void) { return 0; }\n```\n", out, 2), 0);
	assert_int_equal(extract("", out, 2), 0);
	assert_int_equal(extract(NULL, out, 2), 0);
}

static void test_modelnew(void **state)
{
	(void)state;
	const char *labels[] = {"python", "py", "Python", "python3", "", "{.python}", "python title=\"m.py\""};
	for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++) {
		char text[1024];
		snprintf(text, sizeof(text), "Here is ModelNew:\n```%s\n" MODELNEW "```\nDone.", labels[i]);
		char *out[4];
		assert_int_equal(extract_py(text, out, 4), 1);
		assert_string_equal(out[0], MODELNEW);
		free_all(out, 1);
		/* a C search takes no Python module */
		assert_int_equal(extract(text, out, 4), 0);
	}
	char *out[4];
	/* a C block in a ModelNew search is prose, however complete; so is a block with no ModelNew, a
	 * class that only starts with the name, a nested one, or a mention in a comment */
	const char *text = "```c\n#include <kgate/kernel.h>\n" FWD "```\n"
			   "```python\nclass Model(nn.Module):\n    pass\n```\n"
			   "```python\nclass ModelNewer(nn.Module):\n    pass\n```\n"
			   "```python\ndef make():\n    class ModelNew(nn.Module):\n        pass\n```\n"
			   "```python\n# class ModelNew(nn.Module) comes later\n```\n"
			   "```python\n# one\n" MODELNEW "```\n"
			   "~~~py\r\n# two\r\nclass ModelNew :\r\n    pass\r\n~~~\r\n"
			   "```python\n# one\n" MODELNEW "```\n";
	int n = extract_py(text, out, 4);
	assert_int_equal(n, 2);
	assert_non_null(strstr(out[0], "# one\nimport torch"));
	assert_string_equal(out[1], "# two\nclass ModelNew :\n    pass\n");
	free_all(out, n);
	/* no fence: the whole answer when it is a module that imports torch */
	assert_int_equal(extract_py(MODELNEW, out, 4), 1);
	free_all(out, 1);
	assert_int_equal(extract_py("I would write class ModelNew(nn.Module) with a fused kernel.", out, 4), 0);
	assert_int_equal(extract_py(NULL, out, 4), 0);
}

static void test_ideas(void **state)
{
	(void)state;
	char *out[4];
	int n = kg_extract_ideas("Here are ideas:\n```json\n[\"vectorise the row loop\", \"fuse max and sum\", \"tile\"]\n```\n",
				 out, 2);
	assert_int_equal(n, 2);
	assert_string_equal(out[0], "vectorise the row loop");
	assert_string_equal(out[1], "fuse max and sum");
	free_all(out, n);
	n = kg_extract_ideas("[\"a\", \"b\"] trailing prose", out, 4);
	assert_int_equal(n, 2);
	free_all(out, n);
	n = kg_extract_ideas("{\"ideas\": [{\"idea\": \"x\"}, \"y\"]}", out, 4);
	assert_int_equal(n, 2);
	assert_string_equal(out[0], "x");
	free_all(out, n);
	n = kg_extract_ideas("Ideas:\r\n1. blocking for cache\r\n2) unroll by 4\r\n- use expf once\r\nnot an idea\r\n", out, 4);
	assert_int_equal(n, 3);
	assert_string_equal(out[0], "blocking for cache");
	assert_string_equal(out[1], "unroll by 4");
	assert_string_equal(out[2], "use expf once");
	free_all(out, n);
	assert_int_equal(kg_extract_ideas("nothing useful", out, 4), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_several_and_others),
		cmocka_unit_test(test_crlf_indent_unterminated),
		cmocka_unit_test(test_no_fence_and_lookalikes),
		cmocka_unit_test(test_modelnew),
		cmocka_unit_test(test_ideas),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
