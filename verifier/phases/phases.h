/* The phases kg_verify runs in order (verify.c), each over the run's state (run.h), each
 * recording what it finds in the verdict. */
#ifndef KG_PHASES_H
#define KG_PHASES_H

#include "verifier/run.h"

/* build.c: compiles the reference and the candidate, then the candidate's imports; 0 to go on. */
int kg_phase_build(struct kg_run *r);
/* start.c: kgate-device, the reference's runner (its first call at every shape), the candidate's. */
void kg_phase_start(struct kg_run *r);
/* The reference's first call at shape s, before the candidate is loaded (the warm-up): both
 * arenas laid out at s and its inputs drawn (class normal, a seed of its own). */
int kg_start_warm_shape(struct kg_run *r, int s, kg_error *e);
/* trial.c: the correctness phase, trials over every shape and class */
void kg_phase_correctness(struct kg_run *r);
/* timing.c */
void kg_phase_timing(struct kg_run *r);
/* sanitizers.c: compute-sanitizer runs of a GPU candidate */
void kg_phase_sanitizers(struct kg_run *r);
/* baseline.c: eager and torch.compile of the task's torch baseline, timed once the candidate's
 * timing passed (the candidate's runner ends first), and the baselines block of the verdict
 * (reference, eager, compile; the quoted one) whatever ran */
void kg_phase_baselines(struct kg_run *r);

#endif
