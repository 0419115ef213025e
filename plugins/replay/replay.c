/* The `replay` agent: proposes the .c / .cu / .py files of a directory (a .py file is a KernelBench
 * ModelNew module), in name order, as many per round as the round's budget allows, then nothing
 * (which ends the search). For gating code that already exists (a PR's kernels) through the
 * search's bookkeeping, and for tests. Settings: dir (required). */
#include <dirent.h>
#include <errno.h>
#include <kgate/agent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_common.h"
#include "proto/kgate.pb-c.h"

#define MAX_FILES 4096
#define MAX_SOURCE (1u << 20)

struct replay {
	char dir[4096];
	int n;
	char **names; /* sorted */
};

static int fail(char **error, int rc, const char *fmt, const char *arg)
{
	char msg[4200];
	snprintf(msg, sizeof(msg), fmt, arg);
	*error = strdup(msg);
	return rc;
}

static int has_ext(const char *name, const char *ext)
{
	size_t n = strlen(name), k = strlen(ext);
	return n > k && !strcmp(name + n - k, ext);
}

/* A file's language by its extension; UNSPECIFIED: not a candidate. */
static Kgate__V1__Language language(const char *name)
{
	return has_ext(name, ".c")    ? KGATE__V1__LANGUAGE__LANGUAGE_C
	       : has_ext(name, ".cu") ? KGATE__V1__LANGUAGE__LANGUAGE_CUDA
	       : has_ext(name, ".py") ? KGATE__V1__LANGUAGE__LANGUAGE_PYTHON
				      : KGATE__V1__LANGUAGE__LANGUAGE_UNSPECIFIED;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void destroy(void *agent)
{
	struct replay *r = agent;
	if (!r)
		return;
	for (int i = 0; i < r->n; i++)
		free(r->names[i]);
	free(r->names);
	free(r);
}

static int create(const uint8_t *config, size_t len, void **agent, char **error)
{
	*agent = NULL;
	Kgate__V1__AgentConfig *cfg = kgate__v1__agent_config__unpack(NULL, len, config);
	if (!cfg)
		return fail(error, -EBADMSG, "%s", "malformed AgentConfig");
	struct replay *r = calloc(1, sizeof(*r));
	int rc = 0;
	DIR *d = NULL;
	if (!r || !(r->names = calloc(MAX_FILES, sizeof(char *)))) {
		rc = fail(error, -ENOMEM, "%s", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < cfg->n_settings; i++) {
		if (!strcmp(cfg->settings[i]->key, "dir"))
			snprintf(r->dir, sizeof(r->dir), "%s", cfg->settings[i]->value);
		else {
			rc = fail(error, -EINVAL, "unknown setting '%s' (known: dir)", cfg->settings[i]->key);
			goto out;
		}
	}
	if (!r->dir[0]) {
		rc = fail(error, -EINVAL, "%s", "no directory: set 'dir' in the agent config (--agent-opt dir=PATH)");
		goto out;
	}
	if (!(d = opendir(r->dir))) {
		rc = fail(error, -errno, "cannot open directory %s", r->dir);
		goto out;
	}
	struct dirent *de;
	while ((de = readdir(d)) && r->n < MAX_FILES)
		if (de->d_name[0] != '.' && language(de->d_name) != KGATE__V1__LANGUAGE__LANGUAGE_UNSPECIFIED) {
			if (!(r->names[r->n] = strdup(de->d_name))) {
				rc = fail(error, -ENOMEM, "%s", "out of memory");
				goto out;
			}
			r->n++;
		}
	qsort(r->names, (size_t)r->n, sizeof(char *), by_name);
	*agent = r;
	r = NULL;
out:
	if (d)
		closedir(d);
	destroy(r);
	kgate__v1__agent_config__free_unpacked(cfg, NULL);
	return rc;
}

static int propose(void *agent, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char **error)
{
	struct replay *r = agent;
	Kgate__V1__ProposeRequest *q = kgate__v1__propose_request__unpack(NULL, len, req);
	if (!q)
		return fail(error, -EBADMSG, "%s", "malformed ProposeRequest");
	unsigned per = q->budget && q->budget->max_candidates ? q->budget->max_candidates : (unsigned)r->n;
	if (per > 64)
		per = 64; /* sources[] below */
	size_t from = (size_t)(q->round ? q->round - 1 : 0) * per;
	size_t n = from >= (size_t)r->n ? 0 : (size_t)r->n - from < per ? (size_t)r->n - from : per;
	Kgate__V1__ProposeResponse out = KGATE__V1__PROPOSE_RESPONSE__INIT;
	Kgate__V1__Candidate *cands = calloc(n ? n : 1, sizeof(*cands));
	Kgate__V1__Candidate **pc = calloc(n ? n : 1, sizeof(*pc));
	char **ideas = calloc(n ? n : 1, sizeof(*ideas));
	char *sources[64] = {0};
	kg_buf log = {0};
	int rc = 0;
	size_t k = 0;
	if (!cands || !pc || !ideas) {
		rc = fail(error, -ENOMEM, "%s", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n && k < KG_ARRAY_LEN(sources); i++) {
		const char *name = r->names[from + i];
		char path[8300];
		kg_error e = {0};
		snprintf(path, sizeof(path), "%s/%s", r->dir, name);
		if (kg_read_file(path, MAX_SOURCE, &sources[k], NULL, &e)) {
			kg_buf_printf(&log, "skipped %s\n", e.msg);
			continue;
		}
		kgate__v1__candidate__init(&cands[k]);
		cands[k].source = sources[k];
		cands[k].language = language(name);
		cands[k].idea = (uint32_t)k;
		cands[k].name = (char *)name;
		ideas[k] = (char *)name;
		pc[k] = &cands[k];
		k++;
	}
	kg_buf_printf(&log, "replay: %zu of %d files from %s\n", k, r->n, r->dir);
	out.version = KGATE__V1__PROTO_VERSION__PROTO_VERSION_CURRENT;
	out.n_candidates = k;
	out.candidates = pc;
	out.n_ideas = k;
	out.ideas = ideas;
	out.log = (char *)kg_buf_str(&log);
	*resp_len = kgate__v1__propose_response__get_packed_size(&out);
	if (!(*resp = malloc(*resp_len ? *resp_len : 1)))
		rc = fail(error, -ENOMEM, "%s", "out of memory");
	else
		kgate__v1__propose_response__pack(&out, *resp);
out:
	for (size_t i = 0; i < k; i++)
		free(sources[i]);
	free(cands);
	free(pc);
	free(ideas);
	kg_buf_free(&log);
	kgate__v1__propose_request__free_unpacked(q, NULL);
	return rc;
}

static const struct kg_agent_plugin plugin = {
	.abi_major = KG_AGENT_ABI_MAJOR,
	.abi_minor = KG_AGENT_ABI_MINOR,
	.struct_size = sizeof(struct kg_agent_plugin),
	.name = "replay",
	.description = "candidates from a directory of .c / .cu / .py (ModelNew) files",
	.create = create,
	.propose = propose,
	.free_buf = free,
	.destroy = destroy,
};

const struct kg_agent_plugin *kg_agent_plugin_v1(void)
{
	return &plugin;
}
