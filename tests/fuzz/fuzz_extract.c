/* Fuzz harness: what kgate takes out of an LLM's answer (plugins/llm/extract.c): fenced code
 * blocks, the candidates among them, and the ideas (a JSON list, or lines). */
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
	int k = kg_extract_candidates(text, out, 8);
	for (int i = 0; i < k; i++)
		free(out[i]);
	k = kg_extract_ideas(text, out, 8);
	for (int i = 0; i < k; i++)
		free(out[i]);
	free(text);
}
