/* The `anthropic` agent: the Anthropic Messages API. POST {base_url}/v1/messages with x-api-key and
 * anthropic-version; the answer is the concatenated text blocks of content[]. Settings: base_url
 * (ANTHROPIC_BASE_URL, default https://api.anthropic.com), model (KGATE_MODEL, ANTHROPIC_MODEL),
 * api_key (ANTHROPIC_API_KEY), see plugins/README.md. */
#include <kgate/agent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/llm/llm.h"

#define ANTHROPIC_VERSION "2023-06-01"

static int build(const struct kg_llm_provider *p, const char *model, const char *key, int max_tokens,
		 double temperature, const char *system, const char *user, char *url, size_t urlsz, const char *base_url,
		 char **headers, int n_hdr_max, char **body)
{
	(void)p;
	(void)n_hdr_max;
	snprintf(url, urlsz, "%s/v1/messages", base_url);
	if (!(headers[0] = kg_llm_header("anthropic-version: %s", ANTHROPIC_VERSION)))
		return -1;
	if (key && !(headers[1] = kg_llm_header("x-api-key: %s", key)))
		return -1;
	/* max_tokens is required by this API: 0 ("omit") means the default. */
	json_t *j = json_pack("{s:s, s:i, s:s, s:[{s:s, s:s}]}", "model", model, "max_tokens",
			      max_tokens > 0 ? max_tokens : 8192, "system", system, "messages", "role", "user", "content", user);
	if (j && temperature >= 0)
		json_object_set_new(j, "temperature", json_real(temperature > 1.0 ? 1.0 : temperature));
	*body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return *body ? 0 : -1;
}

static const char *block_text(json_t *blk, size_t *len)
{
	const char *type = json_string_value(json_object_get(blk, "type"));
	json_t *t = json_object_get(blk, "text");
	if (!type || strcmp(type, "text") || !json_is_string(t))
		return NULL;
	*len = json_string_length(t);
	return json_string_value(t);
}

static int parse(json_t *root, kg_buf *text, char *why, size_t whysz)
{
	json_t *content = json_object_get(root, "content");
	size_t i, n = 0, len;
	if (!json_is_array(content)) {
		snprintf(why, whysz, "no content[] array");
		return -1;
	}
	for (i = 0; i < json_array_size(content); i++)
		if (block_text(json_array_get(content, i), &len))
			n++;
	if (!n) {
		snprintf(why, whysz, "no text block in content[]");
		return -1;
	}
	for (i = 0; i < json_array_size(content); i++) {
		const char *s = block_text(json_array_get(content, i), &len);
		if (s && kg_buf_append(text, s, len))
			return -1;
	}
	return 0;
}

static const char *const env_key[] = {"ANTHROPIC_API_KEY", NULL};
static const char *const env_base[] = {"ANTHROPIC_BASE_URL", NULL};
static const char *const env_model[] = {"KGATE_MODEL", "ANTHROPIC_MODEL", NULL};

static const struct kg_llm_provider provider = {
	.name = "anthropic",
	.default_base_url = "https://api.anthropic.com",
	.env_key = env_key,
	.env_base_url = env_base,
	.env_model = env_model,
	.key_required_for_default_url = 1,
	.build = build,
	.parse = parse,
};

KG_LLM_PLUGIN("anthropic", "Anthropic Messages API", &provider)
