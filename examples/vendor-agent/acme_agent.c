/* A sample vendor agent for kgate, built against the installed <kgate/agent.h> and the installed
 * kgate.proto only. A toy strategy, to show the plumbing: round 1 proposes the task's reference
 * as a baseline; later rounds propose the fastest accepted seed with a compiler hint in front.
 * Settings: hint (the line to prepend, default "#pragma GCC optimize(\"O3,unroll-loops\")"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kgate/agent.h>

#include "kgate.pb-c.h" /* generated here by protoc-c from share/kgate/proto/kgate.proto */

struct acme {
	char hint[256];
};

static char *dupstr(const char *s)
{
	char *d = malloc(strlen(s) + 1);
	if (d)
		strcpy(d, s);
	return d;
}

static int acme_create(const uint8_t *config, size_t len, void **agent, char **error)
{
	Kgate__V1__AgentConfig *c = kgate__v1__agent_config__unpack(NULL, len, config);
	if (!c) {
		*error = dupstr("malformed AgentConfig");
		return -EBADMSG;
	}
	struct acme *a = calloc(1, sizeof(*a));
	int rc = 0;
	if (!a) {
		rc = -ENOMEM;
		goto out;
	}
	snprintf(a->hint, sizeof(a->hint), "#pragma GCC optimize(\"O3,unroll-loops\")");
	for (size_t i = 0; i < c->n_settings; i++) {
		if (!strcmp(c->settings[i]->key, "hint")) {
			snprintf(a->hint, sizeof(a->hint), "%s", c->settings[i]->value);
		} else {
			/* Unknown settings are errors: a typo should not be silently ignored. */
			*error = dupstr("unknown setting (known: hint)");
			rc = -EINVAL;
			goto out;
		}
	}
	*agent = a;
	a = NULL;
out:
	free(a);
	kgate__v1__agent_config__free_unpacked(c, NULL);
	return rc;
}

static int acme_propose(void *agent, const uint8_t *request, size_t request_len, uint8_t **response,
			size_t *response_len, char **error)
{
	struct acme *a = agent;
	Kgate__V1__ProposeRequest *r = kgate__v1__propose_request__unpack(NULL, request_len, request);
	if (!r) {
		*error = dupstr("malformed ProposeRequest");
		return -EBADMSG;
	}
	Kgate__V1__ProposeResponse out = KGATE__V1__PROPOSE_RESPONSE__INIT;
	Kgate__V1__Candidate cand = KGATE__V1__CANDIDATE__INIT, *cands[1] = {&cand};
	char *idea = NULL, *src = NULL;
	int rc = 0;
	out.version = KGATE__V1__PROTO_VERSION__PROTO_VERSION_CURRENT;
	if (r->n_seeds && r->seeds[0]->source[0]) {
		const char *seed = r->seeds[0]->source;
		size_t n = strlen(a->hint) + strlen(seed) + 2;
		idea = dupstr("the fastest accepted kernel with a compiler hint");
		/* Already hinted: the same source again, which kgate recognises and does not re-verify. */
		if (strstr(seed, a->hint))
			src = dupstr(seed);
		else if ((src = malloc(n)))
			snprintf(src, n, "%s\n%s", a->hint, seed);
	} else if (r->task && r->task->reference_source[0]) {
		idea = dupstr("the reference, as a baseline");
		src = dupstr(r->task->reference_source);
	} else {
		out.error = "no task reference and no seed to start from";
	}
	if (src && idea) {
		cand.source = src;
		cand.language = r->task ? r->task->language : KGATE__V1__LANGUAGE__LANGUAGE_C;
		out.n_ideas = 1;
		out.ideas = &idea;
		out.n_candidates = 1;
		out.candidates = cands;
	} else if (!out.error) {
		rc = -ENOMEM;
		goto done;
	}
	*response_len = kgate__v1__propose_response__get_packed_size(&out);
	if (!(*response = malloc(*response_len ? *response_len : 1))) {
		rc = -ENOMEM;
		goto done;
	}
	kgate__v1__propose_response__pack(&out, *response);
done:
	free(idea);
	free(src);
	kgate__v1__propose_request__free_unpacked(r, NULL);
	return rc;
}

/* Everything the plugin hands out was malloc'ed here, so it is freed here too. */
static void acme_free(void *buf)
{
	free(buf);
}

static void acme_destroy(void *agent)
{
	free(agent);
}

static const struct kg_agent_plugin acme_plugin = {
	.abi_major = KG_AGENT_ABI_MAJOR,
	.abi_minor = KG_AGENT_ABI_MINOR,
	.struct_size = sizeof(struct kg_agent_plugin),
	.name = "acme",
	.description = "ACME sample agent: reference baseline, then hinted seeds",
	.create = acme_create,
	.propose = acme_propose,
	.free_buf = acme_free,
	.destroy = acme_destroy,
};

KG_AGENT_EXPORT const struct kg_agent_plugin *kg_agent_plugin_v1(void)
{
	return &acme_plugin;
}
