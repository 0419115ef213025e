/* Timing: the statistics of a series of timed calls and the judgement of the runner's time claims
 * against the parent's own clock. The timing phase itself (timing.c) runs both sides side by side
 * on fresh inputs with flushed caches and checks every timed output. */
#ifndef KG_TIMING_H
#define KG_TIMING_H

#include <stdint.h>

#include "verifier/verdict.h"

/* Median, p10, p90, min, max and spread of n samples (sorts ms in place). */
void kg_timing_stats(double *ms, int n, struct kg_timing *t);

/* One timed call as both clocks saw it. */
struct kg_timed_call {
	uint64_t child_ns; /* the runner's claim */
	uint64_t parent_ns; /* the parent's round trip of RUN */
	uint64_t span_ns; /* the parent's clock from sending RUN to the outputs being back */
	uint64_t tail_ns; /* the device's claimed tail after the stream */
};

/* What the parent's clocks say of the runner's claims, over every timed call. */
struct kg_tamper {
	int impossible; /* first call whose claim exceeds the parent's round trip, -1 when none */
	double min_hidden_share; /* smallest share of a span left unexplained (0 when under 1 ms) */
};
/* overhead_ns: the channel's round trip (NOP) plus what the trusted runner needed to copy the
 * outputs back; what is left of a span beyond the claim, the tail and the overhead is work hidden
 * from the claim. Work hidden from the claim shows in every call, scheduling noise in some. */
void kg_timing_tamper(const struct kg_timed_call *calls, int n, uint64_t overhead_ns, struct kg_tamper *t);
/* The bound: hidden work in every call, at least this share of its span. */
#define KG_TAMPER_HIDDEN_SHARE 0.5

#endif
