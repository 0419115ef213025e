/* Shared code of the LLM agents (openai, anthropic): HTTP with retries, prompts built from the
 * protobuf request, code extraction from the model's answer, and the agent itself over a small
 * provider table. Linked into each plugin; nothing here is visible outside the plugin. */
#ifndef KG_LLM_H
#define KG_LLM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kg_common.h"
#include "proto/kgate.pb-c.h"

/* ---- code extraction (extract.c) ---- */

struct kg_code_block {
	char lang[16]; /* info string's first word, lower case; "" when unlabeled */
	char *code; /* malloc'ed, LF line ends */
	int terminated; /* 0 when the answer ended inside the fence */
};

/* Every fenced block (``` or ~~~, up to 3 spaces of indent, CRLF or LF) in order. */
int kg_extract_blocks(const char *text, struct kg_code_block **out, int *n);
void kg_free_blocks(struct kg_code_block *b, int n);
/* The candidate sources in an answer for a search in lang: fenced blocks in a C-family language
 * (or unlabeled) that define kg_forward, or for LANGUAGE_PYTHON Python blocks (or unlabeled) that
 * define a top-level class ModelNew; when there is no fence at all, the whole answer if it is
 * one (defines it, and includes a header or imports torch). At most max; each malloc'ed into
 * out[]. Returns how many. */
int kg_extract_candidates(const char *text, Kgate__V1__Language lang, char **out, int max);
/* The ideas in an answer: a JSON array of strings (fenced or bare), else numbered or bulleted
 * lines. At most max, malloc'ed. Returns how many. */
int kg_extract_ideas(const char *text, char **out, int max);

/* ---- retries (retry.c) ---- */

/* Retry-After: delta-seconds or an HTTP-date, relative to now. Milliseconds, or -1 when absent or
 * unparseable. */
long kg_retry_after_ms(const char *value, time_t now);
/* 408, 409, 429 and every 5xx are worth retrying; other 4xx are not. */
int kg_http_retryable(long status);
/* Exponential backoff with jitter for attempt 0, 1, ...: uniform in [d/2, d] with
 * d = min(max_ms, base_ms * 2^attempt). rnd is a uniform 32-bit random number. */
long kg_backoff_ms(int attempt, long base_ms, long max_ms, uint32_t rnd);

/* ---- HTTP (http.c) ---- */

struct kg_http_opts {
	long timeout_ms; /* whole request */
	long connect_timeout_ms;
	int max_retries;
	long backoff_ms, backoff_max_ms;
	long retry_after_max_ms; /* a longer Retry-After is an error, not a sleep */
};

/* Turns the parsed JSON of a 2xx answer into the model's text; <0 with why when the answer is
 * malformed (which is retried like a 5xx). */
typedef int (*kg_llm_parse_fn)(json_t *root, kg_buf *text, char *why, size_t whysz);

/* POSTs body to url with the headers (NULL-terminated "Name: value" strings, which may hold
 * secrets: they are never logged), retrying as above. log gets one line per attempt. */
int kg_http_post(const struct kg_http_opts *o, const char *url, const char *const *headers, const char *body,
		 kg_llm_parse_fn parse, kg_buf *text, kg_buf *log, kg_error *e);
/* url without any user:password@ part, for messages. */
void kg_url_redact(const char *url, char *out, size_t outsz);

/* ---- prompts (prompt.c) ---- */

const char *kg_prompt_system(void);
int kg_prompt_ideas(const Kgate__V1__ProposeRequest *r, kg_buf *out);
int kg_prompt_candidates(const Kgate__V1__ProposeRequest *r, const char *idea, unsigned n, kg_buf *out);

/* ---- the agent over a provider (agent.c) ---- */

struct kg_llm_provider {
	const char *name;
	const char *default_base_url;
	const char *const *env_key; /* NULL-terminated, first set wins */
	const char *const *env_base_url;
	const char *const *env_model;
	int key_required_for_default_url; /* the public endpoint needs a key; a local server may not */
	/* Appends to *headers (at most 8 slots, NULL-terminated) and builds the body. */
	int (*build)(const struct kg_llm_provider *p, const char *model, const char *key, int max_tokens,
		     double temperature, const char *system, const char *user, char *url, size_t urlsz,
		     const char *base_url, char **headers, int n_hdr_max, char **body);
	kg_llm_parse_fn parse;
};

int kg_llm_create(const struct kg_llm_provider *p, const uint8_t *config, size_t len, void **agent, char **error);
int kg_llm_propose(void *agent, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char **error);
void kg_llm_destroy(void *agent);
void kg_llm_free(void *p);
/* "Name: value" built from fmt (one %s) and v, malloc'ed; NULL on exhaustion. */
char *kg_llm_header(const char *fmt, const char *v);

/* The exported table of an LLM plugin: everything but the provider is shared, so each plugin
 * file is its request builder, its response parser, and this one line. */
#define KG_LLM_PLUGIN(plugin_name, plugin_description, provider_ptr)                                       \
	static int kg_llm_plugin_create(const uint8_t *config, size_t len, void **agent, char **error)      \
	{                                                                                                    \
		return kg_llm_create(provider_ptr, config, len, agent, error);                               \
	}                                                                                                    \
	static const struct kg_agent_plugin kg_llm_plugin_table = {                                          \
		.abi_major = KG_AGENT_ABI_MAJOR,                                                             \
		.abi_minor = KG_AGENT_ABI_MINOR,                                                             \
		.struct_size = sizeof(struct kg_agent_plugin),                                               \
		.name = plugin_name,                                                                         \
		.description = plugin_description,                                                           \
		.create = kg_llm_plugin_create,                                                              \
		.propose = kg_llm_propose,                                                                   \
		.free_buf = kg_llm_free,                                                                     \
		.destroy = kg_llm_destroy,                                                                   \
	};                                                                                                   \
	const struct kg_agent_plugin *kg_agent_plugin_v1(void)                                               \
	{                                                                                                    \
		return &kg_llm_plugin_table;                                                                 \
	}

#endif
