/* The `tuner` agent: proposes settings of a template's `kgate:tune` parameters (plugins/tuner/tune.h)
 * as ordinary candidates, each one then verified in full. It keeps no state between rounds: what
 * was tried and how fast it was comes back in every ProposeRequest (idea texts are the settings'
 * labels; the seeds' sources carry theirs), so a resumed or re-hosted search continues the same walk.
 * Settings: template (required), grid_max (default 4096), eta (default 2). */
#include <errno.h>
#include <kgate/agent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_common.h"
#include "plugins/tuner/tune.h"
#include "proto/kgate.pb-c.h"

#define MAX_PROPOSALS 256

struct tuner {
	struct kg_tune_space space;
	char path[4096];
	uint64_t seed, grid_max;
	int eta;
};

static int fail(char **error, int rc, const char *msg)
{
	*error = strdup(msg);
	return rc;
}

static void destroy(void *agent)
{
	struct tuner *t = agent;
	if (!t)
		return;
	kg_tune_free(&t->space);
	free(t);
}

static int parse_u64(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || !*v || *end || *v == '-' || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

static int create(const uint8_t *config, size_t len, void **agent, char **error)
{
	*agent = NULL;
	Kgate__V1__AgentConfig *cfg = kgate__v1__agent_config__unpack(NULL, len, config);
	if (!cfg)
		return fail(error, -EBADMSG, "malformed AgentConfig");
	struct tuner *t = calloc(1, sizeof(*t));
	char msg[1200];
	int rc = 0;
	if (!t) {
		rc = fail(error, -ENOMEM, "out of memory");
		goto out;
	}
	t->grid_max = 4096;
	t->eta = 2;
	t->seed = cfg->seed;
	for (size_t i = 0; i < cfg->n_settings; i++) {
		const char *k = cfg->settings[i]->key, *v = cfg->settings[i]->value;
		uint64_t x;
		if (!strcmp(k, "template")) {
			snprintf(t->path, sizeof(t->path), "%s", v);
		} else if (!strcmp(k, "grid_max") || !strcmp(k, "eta")) {
			int bad = !strcmp(k, "eta") ? parse_u64(v, 2, 16, &x) : parse_u64(v, 0, UINT64_MAX, &x);
			if (bad) {
				snprintf(msg, sizeof(msg), "setting %s: expected a number%s, got '%.100s'", k,
					 !strcmp(k, "eta") ? " in [2, 16]" : "", v);
				rc = fail(error, -EINVAL, msg);
				goto out;
			}
			if (!strcmp(k, "eta"))
				t->eta = (int)x;
			else
				t->grid_max = x;
		} else {
			snprintf(msg, sizeof(msg), "unknown setting '%.100s' (known: template, grid_max, eta)", k);
			rc = fail(error, -EINVAL, msg);
			goto out;
		}
	}
	if (!t->path[0]) {
		rc = fail(error, -EINVAL, "no template: pass --template FILE (or --agent-opt template=FILE)");
		goto out;
	}
	kg_error e = {0};
	if ((rc = kg_tune_load(t->path, &t->space, &e))) {
		rc = fail(error, rc, e.msg);
		goto out;
	}
	*agent = t;
	t = NULL;
out:
	destroy(t);
	kgate__v1__agent_config__free_unpacked(cfg, NULL);
	return rc;
}

/* What was verified (seen) and what was measured (ranked), from the request: history lines by
 * their idea text, seeds by the label in their source's first line. Other entries (another
 * template's, or a hand-written candidate's) are skipped. */
static int gather(const struct tuner *t, const Kgate__V1__ProposeRequest *q, kg_tune_point **seen, int *n_seen,
		  struct kg_tune_result **ranked, int *n_ranked)
{
	size_t cap = q->n_history + q->n_seeds;
	*seen = calloc(cap ? cap : 1, sizeof(**seen));
	*ranked = calloc(cap ? cap : 1, sizeof(**ranked));
	*n_seen = *n_ranked = 0;
	if (!*seen || !*ranked)
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++) {
		const Kgate__V1__CandidateResult *c = i < q->n_history ? q->history[i] : q->seeds[i - q->n_history];
		char label[4096];
		kg_tune_point pt;
		const char *text = c->idea_text;
		if (c->source && c->source[0] && !kg_tune_source_label(c->source, label, sizeof(label)))
			text = label;
		if (kg_tune_parse_label(&t->space, text, &pt))
			continue;
		/* A seed is also in the history: counted once. */
		int dup = 0;
		for (int k = 0; k < *n_seen && !dup; k++)
			dup = !memcmp((*seen)[k].ix, pt.ix, sizeof(pt.ix));
		if (!dup)
			(*seen)[(*n_seen)++] = pt;
		if (c->verdict == KGATE__V1__VERDICT__VERDICT_ACCEPTED && c->timed && c->timing)
			(*ranked)[(*n_ranked)++] = (struct kg_tune_result){.pt = pt, .speedup = c->timing->speedup};
	}
	return 0;
}

static int propose(void *agent, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char **error)
{
	struct tuner *t = agent;
	Kgate__V1__ProposeRequest *q = kgate__v1__propose_request__unpack(NULL, len, req);
	if (!q)
		return fail(error, -EBADMSG, "malformed ProposeRequest");
	Kgate__V1__ProposeResponse out = KGATE__V1__PROPOSE_RESPONSE__INIT;
	out.version = KGATE__V1__PROTO_VERSION__PROTO_VERSION_CURRENT;
	kg_tune_point *seen = NULL, *pts = NULL;
	struct kg_tune_result *ranked = NULL;
	Kgate__V1__Candidate *cands = NULL, **pc = NULL;
	char **ideas = NULL, **sources = NULL;
	kg_buf log = {0}, err = {0};
	int n_seen = 0, n_ranked = 0, n = 0, grid = 0, rc = 0;
	Kgate__V1__Language want = t->space.cuda ? KGATE__V1__LANGUAGE__LANGUAGE_CUDA : KGATE__V1__LANGUAGE__LANGUAGE_C;
	/* A template for the other backend would fail every candidate at compile time: say so once. */
	if (q->task && q->task->language != KGATE__V1__LANGUAGE__LANGUAGE_UNSPECIFIED && q->task->language != want) {
		kg_buf_printf(&err, "template %s is %s, but this search verifies %s candidates (--backend %s)",
			      t->space.name, t->space.cuda ? "CUDA" : "C",
			      q->task->language == KGATE__V1__LANGUAGE__LANGUAGE_CUDA     ? "CUDA"
			      : q->task->language == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON ? "ModelNew (Python)"
											  : "C",
			      t->space.cuda ? "cuda" : "cpu");
		out.error = (char *)kg_buf_str(&err);
		goto pack;
	}
	int budget = q->budget && q->budget->max_candidates ? (int)q->budget->max_candidates : 1;
	if (budget > MAX_PROPOSALS)
		budget = MAX_PROPOSALS;
	if (gather(t, q, &seen, &n_seen, &ranked, &n_ranked) || !(pts = calloc((size_t)budget, sizeof(*pts))) ||
	    !(cands = calloc((size_t)budget, sizeof(*cands))) || !(pc = calloc((size_t)budget, sizeof(*pc))) ||
	    !(ideas = calloc((size_t)budget, sizeof(*ideas))) || !(sources = calloc((size_t)budget, sizeof(*sources)))) {
		rc = fail(error, -ENOMEM, "out of memory");
		goto out;
	}
	struct kg_tune_plan plan = {
		.seed = t->seed,
		.round = (int)(q->round ? q->round : 1),
		.rounds_total = q->budget ? (int)q->budget->rounds_total : 1,
		.budget = budget,
		.eta = t->eta,
		.grid_max = t->grid_max,
	};
	n = kg_tune_next(&t->space, &plan, seen, n_seen, ranked, n_ranked, pts, budget, &grid);
	if (n < 0) {
		rc = fail(error, n, "out of memory");
		n = 0;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		kg_buf lb = {0}, sb = {0};
		if (kg_tune_label(&t->space, &pts[i], &lb) || kg_tune_source(&t->space, &pts[i], &sb)) {
			kg_buf_free(&lb);
			kg_buf_free(&sb);
			n = i;
			rc = fail(error, -ENOMEM, "out of memory");
			goto out;
		}
		ideas[i] = lb.data; /* the buffers' storage is kept, freed below */
		sources[i] = sb.data;
		kgate__v1__candidate__init(&cands[i]);
		cands[i].source = sources[i];
		cands[i].language = want;
		cands[i].idea = (uint32_t)i;
		cands[i].name = ideas[i];
		pc[i] = &cands[i];
	}
	kg_buf_printf(&log, "tuner: %s, %llu settings in %d parameters; round %u: %d new (%d measured so far, %d tried)\n",
		      t->space.name, (unsigned long long)t->space.size, t->space.n, q->round, n, n_ranked, n_seen);
	kg_buf_printf(&log, "tuner: %s\n",
		      grid ? "the space is walked as a grid"
		      : q->round > 1 && n_ranked ? "successive halving around the best settings so far, then random samples"
						 : "random samples");
	out.n_candidates = (size_t)n;
	out.candidates = pc;
	out.n_ideas = (size_t)n;
	out.ideas = ideas;
	out.log = (char *)kg_buf_str(&log);
pack:
	*resp_len = kgate__v1__propose_response__get_packed_size(&out);
	if (!(*resp = malloc(*resp_len ? *resp_len : 1)))
		rc = fail(error, -ENOMEM, "out of memory");
	else
		kgate__v1__propose_response__pack(&out, *resp);
out:
	for (int i = 0; i < n; i++) {
		free(ideas[i]);
		free(sources[i]);
	}
	free(seen);
	free(ranked);
	free(pts);
	free(cands);
	free(pc);
	free(ideas);
	free(sources);
	kg_buf_free(&log);
	kg_buf_free(&err);
	kgate__v1__propose_request__free_unpacked(q, NULL);
	return rc;
}

static const struct kg_agent_plugin plugin = {
	.abi_major = KG_AGENT_ABI_MAJOR,
	.abi_minor = KG_AGENT_ABI_MINOR,
	.struct_size = sizeof(struct kg_agent_plugin),
	.name = "tuner",
	.description = "settings of a template's kgate:tune parameters (grid, or random sampling and successive halving)",
	.create = create,
	.propose = propose,
	.free_buf = free,
	.destroy = destroy,
};

const struct kg_agent_plugin *kg_agent_plugin_v1(void)
{
	return &plugin;
}
