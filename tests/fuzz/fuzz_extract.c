/* Fuzz harness: what kgate takes out of an LLM's answer (plugins/llm/extract.c): fenced code
 * blocks, the candidates among them (C-family and ModelNew), and the ideas (a JSON list, or lines). */
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "extract"
#include "plugins/llm/llm.h"
#include "tests/fuzz/fuzz_main.h"

static void fuzz_setup(void)
{
}

static void fuzz_one(const uint8_t *data, size_t len)
{
	char *text = malloc(len + 1);
	if (!text)
		abort();
	memcpy(text, data, len);
	text[len] = '\0';
	struct kg_code_block *b = NULL;
	int n = 0;
	if (!kg_extract_blocks(text, &b, &n))
		kg_free_blocks(b, n);
	char *out[8];
	/* the C-family and the ModelNew (Python) rules both */
	static const Kgate__V1__Language langs[] = {KGATE__V1__LANGUAGE__LANGUAGE_C, KGATE__V1__LANGUAGE__LANGUAGE_PYTHON};
	int k;
	for (size_t l = 0; l < sizeof(langs) / sizeof(langs[0]); l++) {
		k = kg_extract_candidates(text, langs[l], out, 8);
		for (int i = 0; i < k; i++)
			free(out[i]);
	}
	k = kg_extract_ideas(text, out, 8);
	for (int i = 0; i < k; i++)
		free(out[i]);
	free(text);
}
