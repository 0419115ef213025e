/* Where a verification's wall time goes, step by step (KGATE_DEBUG_PHASES=1 prints it at the end):
 * the figures that say which part of a nominal-shape run to make faster. Process-wide counters,
 * touched only from the verifier's own thread, except the look-ahead reference's (its own entry). */
#ifndef KG_STEPS_H
#define KG_STEPS_H

#include <stdint.h>

#define KG_STEPS(XX)                                                                                   \
	XX(KEEPER_UP, "start: kgate-device up (context, copy rate, kernels)")                               \
	XX(REF_UP, "start: the reference's runner up (sandbox, context, load, calibration)")                \
	XX(CAND_UP, "start: the candidate's runner up (sandbox, context, load, calibration)")               \
	XX(GEN, "generate inputs (host)")                                                                   \
	XX(REF_PREP, "reference: poison, inputs into its arena")                                            \
	XX(REF_CALL, "reference: the call (copies, run, snapshot)")                                         \
	XX(REF_AHEAD, "reference: look-ahead calls (beside the checks)")                                    \
	XX(REF_READ, "reference: reading its outputs, tolerances")                                          \
	XX(CAND_PREP, "candidate: canaries, poison")                                                        \
	XX(CAND_START, "candidate: inputs in, clock started (keeper START / UPLOAD)")                       \
	XX(CAND_RUN, "candidate: RUN round trip")                                                           \
	XX(CAND_END, "candidate: snapshot, outputs back (keeper END / DOWNLOAD), process stopped")          \
	XX(SETTLE, "async check: settle, re-read, compare")                                                 \
	XX(JUDGE, "outputs judged on the device (keeper CHECK)")                                            \
	XX(CHECKS, "checks after the call (bands, inputs, unwritten, outputs, shortcuts)")

enum kg_step {
#define XX(id, what) KG_STEP_##id,
	KG_STEPS(XX)
#undef XX
	KG_STEP_COUNT_
};

/* 1 when KGATE_DEBUG_PHASES is set (read once). */
int kg_steps_on(void);
/* Adds the time since t0 (kg_now_ns) to step; returns now, so steps chain. */
uint64_t kg_steps_add(enum kg_step step, uint64_t t0);
/* The table on stderr, and the counters reset. */
void kg_steps_print(void);

#endif
