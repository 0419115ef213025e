/* A trial's calls, shared by the phases that make them (correctness, timing, sanitizers,
 * baselines, start): the draws behind the inputs and the device's judgement (trial_device.c), the
 * trusted reference's calls and its look-ahead (trial_ref.c), and the candidate's call and the
 * view the pure checks read (trial.c). */
#ifndef KG_TRIAL_H
#define KG_TRIAL_H

#include "verifier/run.h"

/* What one call of the candidate gave, as far as the parent could see. */
struct kg_cand_call {
	int ok; /* the call came back and kg_forward returned 0 */
	struct kg_call_result r;
};

/* ---- trial_device.c: the inputs' draws, the outputs fetched, the device's judgement ---- */
void kg_trial_gen_inputs(struct kg_run *r, enum kg_input_class cls, uint64_t seed);
/* The inputs of (cls, seed) drawn for shadow (next 0) or shadow_next (next 1): their parameters,
 * and the host's buffers filled unless the device draws them (dev_gen). */
void kg_trial_gen_into(struct kg_run *r, int next, enum kg_input_class cls, uint64_t seed);
/* The inputs src holds written into arena a's input slots (drawn on the host first if need be). */
void kg_trial_load_inputs_from(struct kg_run *r, struct kg_arena *a, void *const *src);
/* src (shadow or shadow_next) holding its draw on the host: drawn now if it was not. */
void *const *kg_trial_host_inputs(struct kg_run *r, void *const *src);
/* src's draw where the device is to make it (dev_gen, not on the host), else NULL: load src. */
const struct kg_call_draw *kg_trial_device_draw(struct kg_run *r, void *const *src);
/* Before the checks of a candidate's call: v told whether the device found its inputs as staged,
 * and the host's copy of them drawn if the checks will read them. */
void kg_trial_view_inputs(struct kg_run *r, struct kg_view *v);
/* The outputs of session s's last call (its snapshot on the device) into its host arena; whose
 * names them in an error. 0, or -1 after recording an internal error. */
int kg_trial_fetch_outputs(struct kg_run *r, const struct kg_session *s, const char *whose);
/* The reference's outputs of this trial in refout (fetched from the device if they were left
 * there); 0, or -1 after recording an internal error. Before the look-ahead's next call. */
int kg_trial_refout_host(struct kg_run *r);
/* The candidate's outputs of its last call in its host arena (fetched if they were left on the
 * device); 0, or -1 after recording an internal error. */
int kg_trial_candout_host(struct kg_run *r);
/* The host judges this call: both sides' outputs on the host. 0, or -1 (recorded). */
int kg_trial_host_judges(struct kg_run *r);
/* Output j's CHECK (COMPARE) under this trial's tolerance, both sides' offsets moved by shift (a
 * batch's set); -1 where the device cannot judge it (per-element terms, unlike layouts). */
int kg_trial_compare_check(const struct kg_run *r, int j, uint64_t shift, struct kg_dev_check *chk);
/* After a candidate's call that returned: its outputs judged on the device against the
 * reference's (dev_check). 1: every output written and within tolerance, r->cmp filled; 0: the
 * host is to judge (refout fetched for it); -1 after recording an internal error; -2 when work
 * the candidate left running held the device past the check's deadline (its process killed for
 * it: the caller records the candidate's end). */
int kg_trial_device_judge(struct kg_run *r);

/* ---- trial_ref.c: the trusted reference's calls ---- */
/* The reference on the current inputs; its outputs land in refout. 0, or -1 after recording an
 * internal error (the reference is trusted: its failure is kgate's). */
int kg_trial_reference(struct kg_run *r, int flush, uint64_t *ns);
/* One reference call (poison, call, outputs copied to dst); what names it in an internal error. */
int kg_trial_ref_call(struct kg_run *r, int flush, uint32_t entry, const char *what, void *const *dst,
		    struct kg_call_result *res);
/* The reference on `sets` sets of the current draw at once (kgate-device's batched call, stride
 * bytes apart, each set's inputs under its own key), timed as one span (*ns, the batch's); its
 * outputs stay on the device, the trial's tolerances from all of them. 0, or -1 (recorded). */
int kg_trial_ref_batch(struct kg_run *r, uint32_t sets, uint64_t stride, uint64_t *ns);
/* The reference's measurement (sets > 1: a batch), on a quiet device: taken again while the flush
 * inside it says another context's work ran beside it, and where that lasts with the candidate's
 * process stopped, that process is ended and the device asked again (clock.h's KG_QUIET_*): quiet
 * then, timing.tampered; busy still, kgate's error. 0, or -1 after recording why. */
int kg_trial_ref_quiet(struct kg_run *r, uint32_t sets, uint64_t *ns);
/* Whether the reference's output is near-constant under this trial's tolerance (checks.c's
 * kg_check_degenerate), on the device where the outputs stayed there: the distance of every
 * element from 0 and from the mean of the finite ones. */
int kg_trial_degenerate(struct kg_run *r, const struct kg_view *v);
/* The look-ahead: the next trial's inputs drawn and its reference call started on a thread; taken
 * by that trial (0 taken, 1 not there, -1 failed and recorded), or dropped. */
void kg_trial_ahead_start(struct kg_run *r, enum kg_input_class cls, uint64_t seed);
int kg_trial_ahead_take(struct kg_run *r, enum kg_input_class cls, uint64_t seed, uint64_t *ns);
/* kg_check_outputs, and where an output failed and has `terms: abs_inputs`, again with each
 * element's own term magnitudes from the trusted reference (compare.h). */
int kg_trial_check_outputs(struct kg_run *r, struct kg_view *v, enum kg_reason_code code, struct kg_findings *f);

/* ---- trial.c: the candidate's call ---- */
/* The candidate's arena before a call: this trial's inputs, fresh canaries, poisoned outputs. */
void kg_trial_cand_arena(struct kg_run *r, uint64_t seed);
void kg_trial_candidate(struct kg_run *r, int flush, enum kg_input_class cls, uint64_t seed, struct kg_cand_call *c);
/* The view of the candidate's last call for the pure checks. */
void kg_trial_view(struct kg_run *r, struct kg_view *v);

/* ---- timing_batch.c ---- */
/* One timed measurement of `sets` calls back to back on the device, each on a set of inputs of
 * its own (the draw of (cls, seed) under each set's key): the reference's batch (*ref_ns its
 * span), then the candidate's (c), every set's inputs, bands and outputs judged on the device.
 * 0 when it passed; -1 after recording why not. */
int kg_timing_batched(struct kg_run *r, uint32_t sets, enum kg_input_class cls, uint64_t seed, uint64_t *ref_ns,
		   struct kg_cand_call *c);

#endif
