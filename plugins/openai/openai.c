/* The `openai` agent: OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp server, Ollama's
 * /v1 endpoint). POST {base_url}/chat/completions; the answer is choices[0].message.content.
 * Settings: base_url (OPENAI_BASE_URL, default https://api.openai.com/v1), model (KGATE_MODEL,
 * OPENAI_MODEL), api_key (OPENAI_API_KEY; optional for other base URLs), see plugins/README.md. */
#include <kgate/agent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/llm/llm.h"

static int build(const struct kg_llm_provider *p, const char *model, const char *key, int max_tokens,
		 double temperature, const char *system, const char *user, char *url, size_t urlsz, const char *base_url,
		 char **headers, int n_hdr_max, char **body)
{
	(void)p;
	(void)n_hdr_max;
	snprintf(url, urlsz, "%s/chat/completions", base_url);
	if (key && !(headers[0] = kg_llm_header("Authorization: Bearer %s", key)))
		return -1;
	json_t *j = json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:s}]}", "model", model, "messages", "role", "system", "content",
			      system, "role", "user", "content", user);
	/* Both optional: some models (OpenAI's reasoning ones) refuse max_tokens or a temperature. */
	if (j && max_tokens > 0)
		json_object_set_new(j, "max_tokens", json_integer(max_tokens));
	if (j && temperature >= 0)
		json_object_set_new(j, "temperature", json_real(temperature));
	*body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return *body ? 0 : -1;
}

static int parse(json_t *root, kg_buf *text, char *why, size_t whysz)
{
	json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
	json_t *content = json_object_get(json_object_get(choice, "message"), "content");
	if (!json_is_string(content)) {
		snprintf(why, whysz, "no choices[0].message.content");
		return -1;
	}
	return kg_buf_append(text, json_string_value(content), json_string_length(content));
}

static const char *const env_key[] = {"OPENAI_API_KEY", NULL};
static const char *const env_base[] = {"OPENAI_BASE_URL", NULL};
static const char *const env_model[] = {"KGATE_MODEL", "OPENAI_MODEL", NULL};

static const struct kg_llm_provider provider = {
	.name = "openai",
	.default_base_url = "https://api.openai.com/v1",
	.env_key = env_key,
	.env_base_url = env_base,
	.env_model = env_model,
	.key_required_for_default_url = 1,
	.build = build,
	.parse = parse,
};

KG_LLM_PLUGIN("openai", "OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp, Ollama)", &provider)
