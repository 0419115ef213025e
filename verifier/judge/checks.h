/* The checks of one call, as pure functions: each reads a view of what the call left behind (the
 * candidate's tensors with their guard bands and poison, the inputs as generated, the reference's
 * outputs, the tolerance) and appends findings. None talks to a runner or writes a verdict, so
 * each can be tested on crafted buffers. */
#ifndef KG_CHECKS_H
#define KG_CHECKS_H

#include <stdint.h>

#include "kg_vocab.h"
#include "verifier/arena/arena.h"
#include "verifier/judge/compare.h"

/* What one call of the candidate left, read-only. Slots are the arena's: inputs, then outputs. */
struct kg_view {
	const struct kg_arena *arena; /* the candidate's tensors, guard bands and poison */
	const char *const *names; /* one per slot */
	const void *const *shadow; /* per input: the values as generated */
	const void *const *ref; /* per output: the reference's values */
	const struct kg_tol *tol; /* per output: this trial's tolerance (compare.h) */
	struct kg_cmp *cmp; /* per output, optional: kg_check_outputs leaves each comparison here */
	/* The trusted device found the candidate's inputs (and everything before its outputs) as
	 * staged: kg_check_inputs has nothing to look at (the arena's inputs were not sent back) */
	int inputs_same;
	/* Per input, optional: what tells its contents apart, in place of hashing shadow
	 * (kg_check_shortcuts; inputs drawn on the device, which the host never holds) */
	const uint64_t *input_ids;
	/* kgate-device judged every output and found each written and within its tolerance (cmp
	 * holds its figures): kg_check_unwritten and kg_check_outputs have nothing to do, and ref may
	 * not be on the host at all */
	int outputs_judged;
	/* Per output, optional: kgate-device's hash of it (kg_check_shortcuts, in place of hashing
	 * the arena's copy, which may not be on the host) */
	const uint64_t *output_hashes;
};

struct kg_finding {
	enum kg_reason_code code;
	int slot; /* the arena slot it is about, -1 when none */
	int64_t index; /* flat element index (canaries: byte distance from the tensor's edge), -1 */
	int has_values;
	double expected, got;
	char msg[400];
};

#define KG_MAX_FINDINGS 32
struct kg_findings {
	int n;
	struct kg_finding f[KG_MAX_FINDINGS];
};

/* One finding appended (a full list's last one replaced: the newest is never lost), its message
 * from fmt; slot -1 where it is about none. */
struct kg_finding *kg_findings_add(struct kg_findings *out, enum kg_reason_code code, int slot, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Each appends its findings (at most one per tensor) and returns how many it added. */

/* A guard band rewritten: the first hit, attributed to the nearer tensor edge. */
int kg_check_canaries(const struct kg_view *v, struct kg_findings *out);
/* An input that differs from its shadow: the first differing element. */
int kg_check_inputs(const struct kg_view *v, struct kg_findings *out);
/* An output element still holding its poison (where the reference's value is not the poison). */
int kg_check_unwritten(const struct kg_view *v, struct kg_findings *out);
/* Outputs against the reference within atol + rtol*|ref| (the view's tol). code is check.mismatch
 * (a first wrong element that is NaN makes it check.nan) or check.stale_result for timed calls. */
int kg_check_outputs(const struct kg_view *v, enum kg_reason_code code, struct kg_findings *out);
/* Outputs that changed since `before` (per output, as they were when the call returned). */
int kg_check_unchanged(const struct kg_view *v, const void *const *before, uint32_t delay_ms,
		       struct kg_findings *out);
/* Device work that outlived the call's stream by more than the synchronisation's own latency. */
int kg_check_tail(uint64_t tail_ns, uint64_t call_ns, struct kg_findings *out);

/* 1 when a constant (zero, or an output's finite mean) would pass against the reference under the
 * tolerance: such a trial cannot tell a kernel from a shortcut. Reads only ref and tol. */
int kg_check_degenerate(const struct kg_view *v);

/* What the shortcut check remembers between calls: hashes of the previous inputs and outputs. */
struct kg_shortcut_state {
	int have;
	int mismatch;
	uint64_t in_hash;
	uint64_t out_hash[KG_ARENA_MAX_SLOTS];
};
/* Why a wrong output is wrong, when it is a known shortcut: a copy of an input, or bit-identical
 * to the previous call's output while the inputs changed. Asked only of calls where this or the
 * previous call mismatched (an identity-like result that matches is no finding); updates st. */
int kg_check_shortcuts(const struct kg_view *v, int mismatch, struct kg_shortcut_state *st,
		       struct kg_findings *out);

#endif
