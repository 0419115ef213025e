/* A test agent plugin, built several ways: the well-formed `faulty` plugin (proposes one file,
 * and crashes, hangs or fails in the rounds it is told to), and broken variants for the loader
 * tests: a wrong ABI major (-DBAD_MAJOR), no exported symbol (-DNO_SYMBOL), no propose
 * (-DNO_PROPOSE). */
#include <errno.h>
#include <kgate/agent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kg_common.h"
#include "proto/kgate.pb-c.h"

struct faulty {
	char candidate[4096];
	char crash[64], hang[64], fail[64];
	int noise;
};

static char *dupstr(const char *s)
{
	char *d = malloc(strlen(s) + 1);
	if (d)
		strcpy(d, s);
	return d;
}

/* "1,3" contains round 3? */
static int in_list(const char *list, unsigned round)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if ((unsigned)atoi(t) == round)
			return 1;
	return 0;
}

static int create(const uint8_t *config, size_t len, void **agent, char **error)
{
	Kgate__V1__AgentConfig *c = kgate__v1__agent_config__unpack(NULL, len, config);
	struct faulty *f = calloc(1, sizeof(*f));
	int rc = 0;
	if (!c || !f) {
		rc = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < c->n_settings; i++) {
		const char *k = c->settings[i]->key, *v = c->settings[i]->value;
		if (!strcmp(k, "candidate"))
			snprintf(f->candidate, sizeof(f->candidate), "%s", v);
		else if (!strcmp(k, "crash_rounds"))
			snprintf(f->crash, sizeof(f->crash), "%s", v);
		else if (!strcmp(k, "hang_rounds"))
			snprintf(f->hang, sizeof(f->hang), "%s", v);
		else if (!strcmp(k, "fail_rounds"))
			snprintf(f->fail, sizeof(f->fail), "%s", v);
		else if (!strcmp(k, "stdout_noise"))
			f->noise = 1;
		else if (!strcmp(k, "fail_create")) {
			*error = dupstr("told to fail in create");
			rc = -EINVAL;
			goto out;
		} else {
			*error = dupstr("unknown setting");
			rc = -EINVAL;
			goto out;
		}
	}
	*agent = f;
	f = NULL;
out:
	free(f);
	if (c)
		kgate__v1__agent_config__free_unpacked(c, NULL);
	return rc;
}

static int propose(void *agent, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char **error)
{
	struct faulty *f = agent;
	Kgate__V1__ProposeRequest *r = kgate__v1__propose_request__unpack(NULL, len, req);
	if (!r)
		return -EBADMSG;
	unsigned round = r->round;
	if (f->noise) {
		/* Into stdout, which the helper process must keep away from its protocol. */
		printf("noise noise noise\n");
		fflush(stdout);
	}
	if (in_list(f->crash, round)) {
		/* The default action, not a sanitizer's handler: the test expects death by SIGSEGV. */
		signal(SIGSEGV, SIG_DFL);
		raise(SIGSEGV);
	}
	if (in_list(f->hang, round))
		for (;;)
			pause();
	if (in_list(f->fail, round)) {
		kgate__v1__propose_request__free_unpacked(r, NULL);
		*error = dupstr("told to fail this round");
		return -EIO;
	}
	char *src = NULL;
	if (f->candidate[0] && kg_read_file(f->candidate, 1 << 20, &src, NULL, NULL)) {
		kgate__v1__propose_request__free_unpacked(r, NULL);
		*error = dupstr("cannot read the candidate");
		return -ENOENT;
	}
	char log[256], *idea = "the given file";
	snprintf(log, sizeof(log), "round %u: history %zu seeds %zu task %s", round, r->n_history, r->n_seeds,
		 r->task ? r->task->name : "-");
	Kgate__V1__Candidate c = KGATE__V1__CANDIDATE__INIT, *pc = &c;
	c.source = src;
	c.language = KGATE__V1__LANGUAGE__LANGUAGE_C;
	Kgate__V1__ProposeResponse out = KGATE__V1__PROPOSE_RESPONSE__INIT;
	out.version = 1;
	out.n_candidates = src ? 1 : 0;
	out.candidates = &pc;
	out.n_ideas = 1;
	out.ideas = &idea;
	out.log = log;
	*resp_len = kgate__v1__propose_response__get_packed_size(&out);
	*resp = malloc(*resp_len + 1);
	if (*resp)
		kgate__v1__propose_response__pack(&out, *resp);
	free(src);
	kgate__v1__propose_request__free_unpacked(r, NULL);
	return *resp ? 0 : -ENOMEM;
}

static void destroy(void *agent)
{
	free(agent);
}

static const struct kg_agent_plugin plugin = {
#ifdef BAD_MAJOR
	.abi_major = KG_AGENT_ABI_MAJOR + 1,
#else
	.abi_major = KG_AGENT_ABI_MAJOR,
#endif
	.abi_minor = KG_AGENT_ABI_MINOR,
	.struct_size = sizeof(struct kg_agent_plugin),
	.name = "faulty",
	.description = "test plugin",
	.create = create,
#ifndef NO_PROPOSE
	.propose = propose,
#endif
	.free_buf = free,
	.destroy = destroy,
};

#ifdef NO_SYMBOL
const struct kg_agent_plugin *kg_agent_plugin_v0(void);
const struct kg_agent_plugin *kg_agent_plugin_v0(void)
#else
const struct kg_agent_plugin *kg_agent_plugin_v1(void)
#endif
{
	(void)propose;
	return &plugin;
}
