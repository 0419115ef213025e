/* Building the kgate.v1 messages the agent receives (task, earlier results) and the history
 * lines the search writes, from the task manifest and the verifier's JSON reports. */
#ifndef KG_FEEDBACK_H
#define KG_FEEDBACK_H

#include <jansson.h>
#include <stddef.h>

#include "agents/search.h"
#include "proto/kgate.pb-c.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/task.h"

/* Every allocation of one message tree, freed at once after packing. */
struct kg_pool {
	void **ptrs;
	size_t n, cap;
};
void *kg_pool_alloc(struct kg_pool *p, size_t n); /* zeroed */
char *kg_pool_strdup(struct kg_pool *p, const char *s);
void kg_pool_free(struct kg_pool *p);

/* The agent protocol's Language for a backend (LANGUAGE_UNSPECIFIED when out of range). */
Kgate__V1__Language kg_feedback_language(enum kg_backend_id id);

/* be: the backend the search's candidates are written for (the task message's language). */
Kgate__V1__Task *kg_feedback_task(struct kg_pool *p, const struct kg_task *t, const struct kg_backend *be,
				  const char *shape_set, int variants, const char *abi_header_path);
/* with_source: read the candidate's file into the message (seeds). */
Kgate__V1__CandidateResult *kg_feedback_result(struct kg_pool *p, const struct kg_rec *r, const char *outdir,
					       int with_source);
/* The verdict part of a history line: the report's own verdict, exit_code, reasons, timing,
 * compile_log and error, copied as the JSON report has them (docs/report.md), so that a reader of
 * either knows one structure. New reference; the caller adds round, idea, id, file. */
json_t *kg_feedback_line(const char *report_json, const char *error, int usage);

/* 1 when a report rejects for timing.tampered and nothing else. The parent's round trips were
 * much longer than the runner's own timing: load from the search's other workers can do that to
 * an honest kernel, so the search confirms such a verdict by verifying again with the machine to
 * itself. */
int kg_feedback_timing_only(const char *report_json);

#endif
