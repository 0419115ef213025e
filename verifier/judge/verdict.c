/* Verdict bookkeeping: reasons and checks are appended as the verification goes; the final
 * decision is derived from them, never set by hand. */
#include "verifier/judge/verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kg_verdict_init(struct kg_verdict *v)
{
	memset(v, 0, sizeof(*v));
	v->exit_code = KG_EXIT_INTERNAL;
	v->started = time(NULL);
}

void kg_verdict_free(struct kg_verdict *v)
{
	free(v->reasons);
	free(v->checks);
	v->reasons = NULL;
	v->checks = NULL;
	v->n_reasons = v->n_checks = v->cap_reasons = v->cap_checks = 0;
}

static void *grow(void *arr, int *cap, int n, size_t elem)
{
	if (n < *cap)
		return arr;
	int ncap = *cap ? *cap * 2 : 8;
	void *p = realloc(arr, (size_t)ncap * elem);
	if (!p)
		return NULL;
	*cap = ncap;
	return p;
}

struct kg_reason *kg_verdict_add_reason(struct kg_verdict *v, enum kg_reason_code code, const char *fmt, ...)
{
	static struct kg_reason oom_slot;
	struct kg_reason *arr = grow(v->reasons, &v->cap_reasons, v->n_reasons, sizeof(*arr));
	struct kg_reason *r;
	if (arr) {
		v->reasons = arr;
		r = &arr[v->n_reasons++];
	} else if (v->n_reasons) {
		r = &v->reasons[v->n_reasons - 1];
	} else {
		r = &oom_slot; /* the run cannot be trusted any more: make it an internal error */
		snprintf(v->internal_error, sizeof(v->internal_error), "out of memory recording reason %s",
			 kg_reason_name(code));
	}
	memset(r, 0, sizeof(*r));
	r->index = -1;
	r->code = code;
	r->found = code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
	return r;
}

struct kg_check *kg_verdict_add_check(struct kg_verdict *v, const char *name, enum kg_check_status st,
				      double seconds, const char *fmt, ...)
{
	static struct kg_check oom_check;
	struct kg_check *arr = grow(v->checks, &v->cap_checks, v->n_checks, sizeof(*arr));
	struct kg_check *c = &oom_check;
	if (arr) {
		v->checks = arr;
		c = &arr[v->n_checks++];
	}
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->status = st;
	c->seconds = seconds;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	return c;
}

int kg_verdict_has_reason(const struct kg_verdict *v, enum kg_reason_code code)
{
	for (int i = 0; i < v->n_reasons; i++)
		if (v->reasons[i].code == code)
			return 1;
	return 0;
}

static int any_of_class(const struct kg_verdict *v, int cls)
{
	for (int i = 0; i < v->n_reasons; i++)
		if (kg_reason_exit(v->reasons[i].code) == cls)
			return 1;
	return 0;
}

/* A PASS that no work stands behind is no PASS: correctness without one trial run, timing without
 * one timed call measured. Whatever recorded it (a phase that stopped before its first trial, a
 * check added by mistake), every report shows it as SKIP, "not run" (kgate 0.2 printed "PASS
 * correctness" for shapes that never ran). */
static void no_pass_without_work(struct kg_verdict *v)
{
	for (int i = 0; i < v->n_checks; i++) {
		struct kg_check *c = &v->checks[i];
		if (c->status != KG_CHECK_PASS)
			continue;
		const char *why = !strcmp(c->name, "correctness") && v->trials_run <= 0 ? "no correctness trial ran"
				  : !strcmp(c->name, "timing") && (!v->timed || v->cand.n <= 0) ? "no timed call was measured"
												    : NULL;
		if (!why)
			continue;
		c->status = KG_CHECK_SKIP;
		snprintf(c->detail, sizeof(c->detail), "not run: %s", why);
	}
}

void kg_verdict_finish(struct kg_verdict *v)
{
	no_pass_without_work(v);
	/* Nothing to reject, yet nothing was checked: not an acceptance, "not verified" (exit 3). */
	if (!v->internal_error[0] && !v->n_reasons && v->trials_run <= 0)
		snprintf(v->internal_error, sizeof(v->internal_error),
			 "not verified: no correctness trial ran, and nothing else rejected the candidate");
	/* A rejection the trusted side recorded stands, whatever fails after it: the candidate's fault
	 * was seen (a NaN, a protocol breach) and nothing later makes it unseen, so it is exit 1 with
	 * the later error kept in the report. Otherwise a reason of the internal class (a sandbox the
	 * policy requires that the host cannot build) or kgate's own error is exit 3. */
	if (any_of_class(v, KG_EXITCLASS_REJECTED)) {
		v->accepted = 0;
		v->exit_code = KG_EXIT_REJECTED;
	} else if (v->internal_error[0] || any_of_class(v, KG_EXITCLASS_INTERNAL)) {
		v->accepted = 0;
		v->exit_code = KG_EXIT_INTERNAL;
	} else if (v->n_reasons) {
		v->accepted = 0;
		v->exit_code = KG_EXIT_REJECTED;
	} else {
		v->accepted = 1;
		v->exit_code = KG_EXIT_ACCEPTED;
	}
}
