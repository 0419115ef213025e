/* The search's side of the agent: its config message from the settings, the plugin opened on first
 * use, the propose request (the task, the seeds, the bounded history) and the round's proposals,
 * saved before anything is verified so that an interrupted search resumes from them. */
#include "agents/search_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kg_search_agent_config(struct search *s, kg_error *e)
{
	const struct kg_search_opts *o = s->o;
	Kgate__V1__AgentConfig c = KGATE__V1__AGENT_CONFIG__INIT;
	Kgate__V1__Setting set[KG_SEARCH_MAX_SETTINGS], *ps[KG_SEARCH_MAX_SETTINGS];
	for (int i = 0; i < o->n_settings; i++) {
		kgate__v1__setting__init(&set[i]);
		set[i].key = (char *)o->keys[i];
		set[i].value = (char *)o->values[i];
		ps[i] = &set[i];
	}
	c.version = KGATE__V1__PROTO_VERSION__PROTO_VERSION_CURRENT;
	c.n_settings = (size_t)o->n_settings;
	c.settings = ps;
	c.seed = o->seed;
	s->config_len = kgate__v1__agent_config__get_packed_size(&c);
	if (!(s->config = malloc(s->config_len ? s->config_len : 1)))
		return kg_err(e, -ENOMEM, "out of memory");
	kgate__v1__agent_config__pack(&c, s->config);
	return 0;
}

static int open_agent(struct search *s, kg_error *e)
{
	if (s->agent)
		return 0;
	struct kg_agent_opts ao = {
		.plugin = s->o->agent,
		.isolation = s->o->isolation,
		.host_exe = s->o->host_exe,
		.timeout_s = s->o->agent_timeout_s,
		.config = s->config,
		.config_len = s->config_len,
	};
	int rc = kg_agent_open(&ao, &s->agent, e);
	if (!rc)
		kg_search_say(s, "agent: %s (%s)\n", kg_agent_name(s->agent),
			      s->o->isolation == KG_AGENT_INPROC ? "in process" : "isolated in a helper process");
	return rc;
}

/* ---- proposing ---- */

static int build_request(struct search *s, int round, uint8_t **out, size_t *len, kg_error *e)
{
	const struct kg_search_opts *o = s->o;
	struct kg_pool p = {0};
	Kgate__V1__ProposeRequest r = KGATE__V1__PROPOSE_REQUEST__INIT;
	Kgate__V1__Budget b = KGATE__V1__BUDGET__INIT;
	const struct kg_rec *best[KG_SEARCH_MAX_BRANCH * 4];
	int rc = 0;
	int k = kg_history_best(&s->h, best, o->keep);
	int from = s->h.n > o->history_limit ? s->h.n - o->history_limit : 0;
	r.version = KGATE__V1__PROTO_VERSION__PROTO_VERSION_CURRENT;
	r.task = s->task_msg;
	r.round = (uint32_t)round;
	b.rounds_total = (uint32_t)o->rounds;
	b.rounds_left = (uint32_t)(o->rounds - round);
	b.max_candidates = (uint32_t)(o->branch * o->per_idea);
	b.timeout_seconds = (uint32_t)o->agent_timeout_s;
	r.budget = &b;
	r.branch = (uint32_t)o->branch;
	r.candidates_per_idea = (uint32_t)o->per_idea;
	r.seeds = kg_pool_alloc(&p, (size_t)k * sizeof(*r.seeds));
	r.history = kg_pool_alloc(&p, (size_t)(s->h.n - from) * sizeof(*r.history));
	if (!r.seeds || !r.history)
		goto oom;
	for (int i = 0; i < k; i++)
		if (!(r.seeds[r.n_seeds++] = kg_feedback_result(&p, best[i], o->outdir, 1)))
			goto oom;
	for (int i = from; i < s->h.n; i++)
		if (!(r.history[r.n_history++] = kg_feedback_result(&p, &s->h.recs[i], o->outdir, 0)))
			goto oom;
	*len = kgate__v1__propose_request__get_packed_size(&r);
	if (!(*out = malloc(*len ? *len : 1)))
		goto oom;
	kgate__v1__propose_request__pack(&r, *out);
	goto out;
oom:
	rc = kg_err(e, -ENOMEM, "out of memory building the propose request");
out:
	kg_pool_free(&p);
	return rc;
}

/* The round's proposals: the saved response of an interrupted run, else a fresh propose call
 * whose response is saved before anything is verified. */
int kg_search_get_proposals(struct search *s, int round, kg_error *e)
{
	char path[PATH_MAX];
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc;
	kg_search_outpath(s, path, sizeof(path), "rounds/round-%d.pb", round);
	if (!access(path, R_OK)) {
		char *text = NULL;
		if (!kg_read_file(path, KG_AGENT_MAX_FRAME, &text, &len, NULL)) {
			s->resp = kgate__v1__propose_response__unpack(NULL, len, (uint8_t *)text);
			free(text);
			if (s->resp) {
				kg_search_say(s, "round %d: resuming with the %zu proposals saved by the interrupted run\n",
					      round, s->resp->n_candidates);
				return 0;
			}
		}
	}
	if ((rc = open_agent(s, e)))
		return rc;
	uint8_t *req = NULL;
	size_t req_len = 0;
	if ((rc = build_request(s, round, &req, &req_len, e)))
		return rc;
	kg_search_say(s, "round %d: asking %s for %d ideas x %d candidates\n", round, kg_agent_name(s->agent),
		      s->o->branch, s->o->per_idea);
	rc = kg_agent_propose(s->agent, req, req_len, &buf, &len, e);
	free(req);
	if (rc)
		return rc;
	s->resp = kgate__v1__propose_response__unpack(NULL, len, buf);
	if (!s->resp) {
		free(buf);
		return kg_err(e, -EBADMSG, "agent '%s' returned a malformed ProposeResponse", kg_agent_name(s->agent));
	}
	/* The agent's log (retries, errors) to stderr, line by line; it is kept whole for history. */
	for (const char *l = s->resp->log; !s->o->quiet && *l;) {
		size_t n = strcspn(l, "\n");
		if (n) {
			fputs("  [agent] ", stderr);
			kg_search_put_line(stderr, l, n);
			fputc('\n', stderr);
		}
		l += n + (l[n] == '\n');
	}
	if (s->resp->error[0]) {
		rc = kg_err(e, -EIO, "agent '%s': %s", kg_agent_name(s->agent), s->resp->error);
		kgate__v1__propose_response__free_unpacked(s->resp, NULL);
		s->resp = NULL;
		free(buf);
		return rc;
	}
	rc = kg_write_atomic(path, buf, len, e);
	free(buf);
	return rc;
}
