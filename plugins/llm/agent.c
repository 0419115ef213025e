/* The LLM agent behind both the openai and anthropic plugins: one call for B ideas, then one call
 * per idea for N candidates, each answer mined for fenced code. A provider table supplies the
 * wire format. The API key lives only in this struct and in request headers; every string that
 * leaves the plugin is scrubbed of it. */
#include "plugins/llm/llm.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDEAS 16
#define MAX_PER_IDEA 16

struct llm_agent {
	const struct kg_llm_provider *p;
	char base_url[1024];
	char model[256];
	char *key; /* NULL: none (local servers) */
	struct kg_http_opts http;
	int max_tokens;
	double temperature;
};

static const char *first_env(const char *const *names)
{
	for (int i = 0; names && names[i]; i++) {
		const char *v = getenv(names[i]);
		if (v && *v)
			return v;
	}
	return NULL;
}

/* Replaces every occurrence of the key in s with "***" (in place: never longer). */
static void scrub(const struct llm_agent *a, char *s)
{
	if (!a->key || strlen(a->key) < 4 || !s)
		return;
	size_t kl = strlen(a->key);
	for (char *p = strstr(s, a->key); p; p = strstr(p, a->key)) {
		memcpy(p, "***", 3);
		memmove(p + 3, p + kl, strlen(p + kl) + 1);
	}
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || !*v || *end || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

static int apply_setting(struct llm_agent *a, const char *k, const char *v, char *why, size_t whysz)
{
	long x;
	if (!strcmp(k, "base_url")) {
		snprintf(a->base_url, sizeof(a->base_url), "%s", v);
		return 0;
	}
	if (!strcmp(k, "model")) {
		snprintf(a->model, sizeof(a->model), "%s", v);
		return 0;
	}
	if (!strcmp(k, "api_key")) {
		free(a->key);
		a->key = *v ? strdup(v) : NULL;
		return 0;
	}
	if (!strcmp(k, "temperature")) {
		char *end;
		if (!strcmp(v, "omit")) { /* models that accept only their default */
			a->temperature = -1;
			return 0;
		}
		double t = strtod(v, &end);
		if (!*v || *end || t < 0 || t > 2)
			goto bad;
		a->temperature = t;
		return 0;
	}
	static const struct {
		const char *name;
		long lo, hi, scale;
		size_t off;
	} nums[] = {
		{"timeout_s", 1, 86400, 1000, offsetof(struct llm_agent, http.timeout_ms)},
		{"connect_timeout_s", 1, 3600, 1000, offsetof(struct llm_agent, http.connect_timeout_ms)},
		{"backoff_ms", 0, 600000, 1, offsetof(struct llm_agent, http.backoff_ms)},
		{"backoff_max_ms", 0, 3600000, 1, offsetof(struct llm_agent, http.backoff_max_ms)},
		{"retry_after_max_s", 0, 86400, 1000, offsetof(struct llm_agent, http.retry_after_max_ms)},
	};
	for (size_t i = 0; i < KG_ARRAY_LEN(nums); i++)
		if (!strcmp(k, nums[i].name)) {
			if (parse_long(v, nums[i].lo, nums[i].hi, &x))
				goto bad;
			*(long *)((char *)a + nums[i].off) = x * nums[i].scale;
			return 0;
		}
	if (!strcmp(k, "max_retries") || !strcmp(k, "max_tokens")) {
		if (parse_long(v, 0, 1000000, &x))
			goto bad;
		if (!strcmp(k, "max_retries"))
			a->http.max_retries = (int)x;
		else
			a->max_tokens = (int)x;
		return 0;
	}
	snprintf(why, whysz,
		 "unknown setting '%s' (known: base_url, model, api_key, timeout_s, connect_timeout_s, max_retries, "
		 "backoff_ms, backoff_max_ms, retry_after_max_s, max_tokens, temperature)",
		 k);
	return -EINVAL;
bad:
	/* The value is not echoed: it might be a misplaced secret. */
	snprintf(why, whysz, "setting '%s': bad value", k);
	return -EINVAL;
}

static int fail(char **error, int rc, const char *msg)
{
	if (error)
		*error = strdup(msg);
	return rc;
}

int kg_llm_create(const struct kg_llm_provider *p, const uint8_t *config, size_t len, void **agent, char **error)
{
	*agent = NULL;
	char why[512];
	int rc = 0;
	Kgate__V1__AgentConfig *cfg = kgate__v1__agent_config__unpack(NULL, len, config);
	if (!cfg)
		return fail(error, -EBADMSG, "malformed AgentConfig");
	struct llm_agent *a = calloc(1, sizeof(*a));
	if (!a) {
		rc = fail(error, -ENOMEM, "out of memory");
		goto out;
	}
	a->p = p;
	a->http = (struct kg_http_opts){.timeout_ms = 300000,
					.connect_timeout_ms = 10000,
					.max_retries = 4,
					.backoff_ms = 1000,
					.backoff_max_ms = 60000,
					.retry_after_max_ms = 300000};
	a->max_tokens = 8192;
	a->temperature = 0.7;
	/* Environment first, the agent config over it. */
	const char *v = first_env(p->env_base_url);
	snprintf(a->base_url, sizeof(a->base_url), "%s", v ? v : p->default_base_url);
	if ((v = first_env(p->env_model)))
		snprintf(a->model, sizeof(a->model), "%s", v);
	if ((v = first_env(p->env_key)) && !(a->key = strdup(v))) {
		rc = fail(error, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < cfg->n_settings; i++)
		if ((rc = apply_setting(a, cfg->settings[i]->key, cfg->settings[i]->value, why, sizeof(why)))) {
			fail(error, rc, why);
			goto out;
		}
	while (a->base_url[0] && a->base_url[strlen(a->base_url) - 1] == '/')
		a->base_url[strlen(a->base_url) - 1] = '\0';
	if (strncmp(a->base_url, "http://", 7) && strncmp(a->base_url, "https://", 8)) {
		rc = fail(error, -EINVAL, "base_url must start with http:// or https://");
		goto out;
	}
	if (!a->model[0]) {
		snprintf(why, sizeof(why), "no model: set %s or 'model' in the agent config", p->env_model[0]);
		rc = fail(error, -EINVAL, why);
		goto out;
	}
	if (!a->key && p->key_required_for_default_url && !strcmp(a->base_url, p->default_base_url)) {
		snprintf(why, sizeof(why), "no API key for %s: set %s or 'api_key' in the agent config", a->base_url,
			 p->env_key[0]);
		rc = fail(error, -EACCES, why);
		goto out;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	*agent = a;
	a = NULL;
out:
	kg_llm_destroy(a);
	kgate__v1__agent_config__free_unpacked(cfg, NULL);
	return rc;
}

void kg_llm_destroy(void *agent)
{
	struct llm_agent *a = agent;
	if (!a)
		return;
	if (a->key) {
		/* Not left lying in freed memory for a later core dump. */
		volatile char *k = a->key;
		while (*k)
			*k++ = 0;
		free(a->key);
	}
	free(a);
}

void kg_llm_free(void *p)
{
	free(p);
}

static void buf_reset(kg_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/* One chat turn: system + user in, the model's text out. */
static int ask(struct llm_agent *a, const char *user, kg_buf *text, kg_buf *log, kg_error *e)
{
	char url[1200];
	char *hdr[9] = {0};
	char *body = NULL;
	int rc = a->p->build(a->p, a->model, a->key, a->max_tokens, a->temperature, kg_prompt_system(), user, url,
			     sizeof(url), a->base_url, hdr, 8, &body);
	if (rc)
		rc = kg_err(e, rc, "cannot build the request");
	else
		rc = kg_http_post(&a->http, url, (const char *const *)hdr, body, a->p->parse, text, log, e);
	for (int i = 0; hdr[i]; i++) {
		/* Headers hold the key: wiped before they are freed. */
		memset(hdr[i], 0, strlen(hdr[i]));
		free(hdr[i]);
	}
	free(body);
	return rc;
}

static Kgate__V1__Candidate *new_candidate(char *src, Kgate__V1__Language lang, unsigned idea)
{
	Kgate__V1__Candidate *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	kgate__v1__candidate__init(c);
	c->source = src;
	c->language = lang;
	c->idea = idea;
	return c;
}

int kg_llm_propose(void *agent, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char **error)
{
	struct llm_agent *a = agent;
	Kgate__V1__ProposeRequest *r = kgate__v1__propose_request__unpack(NULL, len, req);
	if (!r)
		return fail(error, -EBADMSG, "malformed ProposeRequest");
	Kgate__V1__ProposeResponse out = KGATE__V1__PROPOSE_RESPONSE__INIT;
	char *ideas[MAX_IDEAS] = {0};
	Kgate__V1__Candidate *cands[MAX_IDEAS * MAX_PER_IDEA] = {0};
	kg_buf prompt = {0}, text = {0}, log = {0};
	kg_error e = {0};
	char errmsg[sizeof(e.msg) + 64] = "";
	unsigned branch = r->branch ? r->branch : 1, per = r->candidates_per_idea ? r->candidates_per_idea : 1;
	Kgate__V1__Language lang = r->task && r->task->language ? r->task->language : KGATE__V1__LANGUAGE__LANGUAGE_C;
	int rc = 0, n_ideas = 0;
	size_t n_cands = 0;
	if (branch > MAX_IDEAS)
		branch = MAX_IDEAS;
	if (per > MAX_PER_IDEA)
		per = MAX_PER_IDEA;

	kg_buf_printf(&log, "%s agent, model %s\n", a->p->name, a->model);
	if (kg_prompt_ideas(r, &prompt) || ask(a, kg_buf_str(&prompt), &text, &log, &e)) {
		snprintf(errmsg, sizeof(errmsg), "asking for ideas: %s", e.msg[0] ? e.msg : "out of memory");
		goto done;
	}
	n_ideas = kg_extract_ideas(kg_buf_str(&text), ideas, (int)branch);
	if (n_ideas == 0) {
		kg_buf_printf(&log, "no ideas found in the answer; using one generic idea\n");
		if (!(ideas[0] = strdup("a faster, correct implementation of the task")))
			goto oom;
		n_ideas = 1;
	}
	for (int i = 0; i < n_ideas; i++) {
		buf_reset(&prompt);
		buf_reset(&text);
		e = (kg_error){0};
		if (kg_prompt_candidates(r, ideas[i], per, &prompt) || ask(a, kg_buf_str(&prompt), &text, &log, &e)) {
			/* One idea failing does not lose the others. */
			snprintf(errmsg, sizeof(errmsg), "idea %d: %s", i + 1, e.msg[0] ? e.msg : "out of memory");
			kg_buf_printf(&log, "%s\n", errmsg);
			continue;
		}
		char *srcs[MAX_PER_IDEA];
		int k = kg_extract_candidates(kg_buf_str(&text), lang, srcs, (int)per);
		if (!k)
			kg_buf_printf(&log, "idea %d: no code block defining %s in the answer\n", i + 1,
				      lang == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON ? "class ModelNew" : "kg_forward");
		for (int j = 0; j < k; j++) {
			if (!(cands[n_cands] = new_candidate(srcs[j], lang, (unsigned)i))) {
				for (int m = j; m < k; m++)
					free(srcs[m]);
				goto oom;
			}
			n_cands++;
		}
	}
	if (n_cands)
		errmsg[0] = '\0'; /* partial success is success; the log keeps what failed */
	else if (!errmsg[0])
		snprintf(errmsg, sizeof(errmsg), "the model's answers contained no candidate code");
	goto done;
oom:
	rc = -ENOMEM;
done:
	scrub(a, errmsg);
	if (log.data)
		scrub(a, log.data), log.len = strlen(log.data);
	out.version = KGATE__V1__PROTO_VERSION__PROTO_VERSION_CURRENT;
	out.n_ideas = (size_t)n_ideas;
	out.ideas = ideas;
	out.n_candidates = n_cands;
	out.candidates = cands;
	out.error = errmsg;
	out.log = (char *)kg_buf_str(&log);
	if (!rc) {
		*resp_len = kgate__v1__propose_response__get_packed_size(&out);
		if ((*resp = malloc(*resp_len ? *resp_len : 1)))
			kgate__v1__propose_response__pack(&out, *resp);
		else
			rc = -ENOMEM;
	}
	if (rc)
		fail(error, rc, "out of memory");
	for (int i = 0; i < n_ideas; i++)
		free(ideas[i]);
	for (size_t i = 0; i < n_cands; i++) {
		free(cands[i]->source);
		free(cands[i]);
	}
	kg_buf_free(&prompt);
	kg_buf_free(&text);
	kg_buf_free(&log);
	kgate__v1__propose_request__free_unpacked(r, NULL);
	return rc;
}
