/* Internal to the verifier: the state one verification carries from phase to phase (built from
 * the read-only plan), and what run.c does with it: its lifetime, the layout of a shape, progress
 * and internal errors, and what the candidate's ends and the checks' findings earn it as reasons.
 * The phases (phases/phases.h) record what they find in the verdict; kg_run_ok() says whether the
 * next one should run. */
#ifndef KG_RUN_H
#define KG_RUN_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "verifier/arena/arena.h"
#include "verifier/judge/checks.h"
#include "verifier/plan/gpu.h"
#include "verifier/plan/plan.h"
#include "verifier/session/session.h"
#include "verifier/judge/verdict.h"
#include "verifier/session/keeper.h"

#define KG_RUN_MAX_T KG_MAX_TENSORS

struct kg_run {
	const struct kg_plan *plan;
	struct kg_verdict *v;
	char work[PATH_MAX];
	char ref_so[PATH_MAX + 32], cand_so[PATH_MAX + 32];
	char cand_module[PATH_MAX + 32]; /* an interpreted candidate's module (its source as built) */
	/* A module task's state file (torchtask.h), which both torch runners get: "" where the
	 * reference is not a module. Shapes the Model itself refuses (there, or when its runner fails
	 * at a shape other than the base) are dropped: no trial runs there, and the verdict's module
	 * report says why. */
	char state_path[PATH_MAX + 48];
	unsigned char dropped[KG_PLAN_MAX_SHAPES];
	struct kg_gpu_info gpu;
	char sanitizer[PATH_MAX]; /* compute-sanitizer, when the policy asks for sanitized runs */
	/* one arena and one runner per side: the reference's outputs never reach the candidate's */
	struct kg_arena ra, ca;
	struct kg_session rs, cs;
	int rs_up, cs_up;
	/* kgate-device, when either side runs on a device: it owns both device arenas */
	struct kg_keeper keeper;
	int cand_dead; /* its process ended, or it cannot be talked to any more */
	int shape; /* index into plan->shapes of the current layout */
	const char *names[2 * KG_RUN_MAX_T]; /* per arena slot */
	void *shadow[KG_RUN_MAX_T]; /* the inputs as generated, kept by the trusted side */
	/* The next trial's inputs and its reference call, run while this trial's checks do (the
	 * candidate is idle then: nothing it could time overlaps), taken by the next trial. */
	void *shadow_next[KG_RUN_MAX_T];
	struct kg_ref_ahead {
		int active; /* a thread runs a reference call on rs */
		int ready; /* its result belongs to (cls, seed), not yet taken */
		enum kg_input_class cls;
		uint64_t seed;
		pthread_t th;
		int rc;
		int kept; /* its outputs stay on the device (dev_check) */
		struct kg_call_result res;
		kg_error e;
	} ahead;
	void *refout[KG_RUN_MAX_T]; /* the reference's outputs of the current trial */
	/* With kgate-device's checks (dev_check), the reference's outputs stay in its snapshot on the
	 * device: refout holds them only once fetched (refout_host), for a check the device left to
	 * the host; ref_stats are the device's figures of them (finite sum, sum of squares, count) */
	int dev_check, refout_host;
	int judged; /* the current candidate call's outputs were judged on the device */
	/* The candidate's outputs stay on the device too (dev_check and one output: no guard band
	 * lies between outputs, so every band still comes back at END); candout_host: the host arena
	 * holds the current call's (fetched for a check that reads them); out_hash: the device's hash
	 * of each (the shortcut check's), valid where out_hash_ok */
	int cand_keep, candout_host, out_hash_ok;
	uint64_t out_hash[KG_RUN_MAX_T];
	struct kg_dev_cmp ref_stats[KG_RUN_MAX_T];
	void *snap[KG_RUN_MAX_T]; /* outputs as the call returned them (async check) */
	void *terms[KG_RUN_MAX_T]; /* per output with `terms: abs_inputs`: the reference on |inputs| */
	struct kg_tol tol[KG_RUN_MAX_T]; /* this trial's tolerance per output */
	struct kg_cmp cmp[KG_RUN_MAX_T]; /* the last comparison per output (accuracy in the verdict) */
	uint64_t ref_ns_last; /* the reference's last call, bounds the candidate's deadline */
	uint64_t ref_download_ns; /* the trusted runner's last DOWNLOAD: copy cost, no work */
	/* the trusted runner's last call: CPU time its process was charged beyond its own clock and a
	 * call that does nothing (what the host adds to any call right now); 0 when unknown */
	uint64_t ref_excess_ns;
	uint64_t ref_poison_seq;
	void *const *ref_src; /* the inputs the reference's next call writes into its arena (NULL: none) */
	/* The draws shadow and shadow_next stand for (the generator's parameters under each trial's
	 * key), whether those host buffers hold them, and which draw each is (kg_trial_gen_into numbers
	 * them from 1): where kgate-device draws the inputs itself (dev_gen), a buffer is drawn on the
	 * host only when a check or a host runner needs it. */
	struct kg_run_draw {
		struct kg_call_draw d;
		int host;
		uint64_t id;
	} shadow_gen, shadow_next_gen;
	int dev_gen;
	uint64_t input_ids[KG_RUN_MAX_T]; /* the current draw's, for the shortcut check (dev_gen) */
	/* Which draw the reference's last call staged on the device (a kg_run_draw's id): where that is
	 * the candidate's call's, the keeper copies them from the reference's private copy instead of
	 * the bus (0: none, or not known); draws: the last id given */
	uint64_t ref_staged_draw, draws;
	/* The candidate's next call is probed mid-call (probe_ns after RUN, its process stopped) for
	 * guard bands in use: a band written and restored within the call is seen there. */
	uint64_t probe_ns;
	struct {
		int hit, slot, side;
		uint64_t distance;
	} probe_found;
	struct kg_shortcut_state shortcuts;
	/* Batched timed calls (timing_batch.c): the sets each device arena has room for (0: none),
	 * their stride, and the sets of the candidate's next call (0: one call) */
	uint32_t batch_room, batch_sets;
	uint64_t batch_stride;
	unsigned degenerate_mask;
	int n_trials, n_class_checks, n_degenerate;
	int trial_no, trial_total;
	/* kgate's count of the device memory the candidate holds (policy gpu.memory_mb): what the
	 * reference's calls took from the device's free memory since the candidate's baseline (its
	 * session's dev_free0), each call's START against its END */
	int64_t ref_dev_grown;
	/* the quiet device: a flush's time with nothing of the candidate's on it (the keeper's at its
	 * start, the calibrations' before LOAD: the least), and the reference's last call's flush */
	uint64_t quiet_flush_ns, ref_flush_ns;
};

static inline int kg_run_ok(const struct kg_run *r)
{
	return !r->cand_dead && !r->v->internal_error[0] && !r->v->n_reasons;
}

/* ---- its lifetime: buffers, arenas, and (kg_run_free) the runners and kgate-device ---- */
int kg_run_alloc(struct kg_run *r, kg_error *e);
void kg_run_free(struct kg_run *r);
/* The progress line (or the heartbeat's phase), and kgate's own error (the first one kept). */
void kg_run_progress(struct kg_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kg_run_internal(struct kg_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double kg_run_secs_since(uint64_t t0);

/* ---- shapes ---- */
/* Lays out arena a for shape s (and makes s the current shape). */
int kg_run_layout(struct kg_run *r, int s, struct kg_arena *a, kg_error *e);
/* Lays out both arenas for shape s, alike: the draws are made at the candidate arena's layout
 * (kg_trial_gen_into) and staged at either side's. */
int kg_run_layout_both(struct kg_run *r, int s, kg_error *e);
/* Lays out both arenas for shape s and tells both runners; 0, or -1 after recording why. */
int kg_run_set_shape(struct kg_run *r, int s, const char *during);
/* Drops shape s (never the base one) from the trials: the Model itself refuses it (why), which is
 * no verdict about the candidate. Said in the verdict's module report. */
void kg_run_drop_shape(struct kg_run *r, int s, const char *why);
/* "N=64 D=128", the current layout's dims */
const char *kg_run_shape_str(const struct kg_run *r);
/* Waits for the look-ahead's reference call in flight (phases/trial_ref.c) and forgets it: the
 * reference session is needed for something else (a term-magnitude call, a timed call, a new
 * shape), and the trial it was for starts over. */
void kg_run_ahead_drop(struct kg_run *r);

/* ---- what the candidate's ends and the checks' findings earn it ---- */
/* One reason per (code, shape): 1 when code already has one at this shape, now counted once more
 * and cls listed (what a reader needs: "fails only for large inputs"); 0 when it has none. */
int kg_run_already_reported(struct kg_run *r, enum kg_reason_code code, enum kg_input_class cls);
/* A reason of a trial: its class, seed and the current shape filled in, counted once. */
struct kg_reason *kg_run_trial_reason(struct kg_run *r, enum kg_reason_code code, enum kg_input_class cls,
				      uint64_t seed, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Findings become reasons with the trial's class, seed and shape: one reason per code and shape
 * (repeats are counted, their classes listed); at a variant shape a wrong value is the finding
 * check.shape_variant. when ("after the call") starts each message. Returns the count recorded. */
int kg_run_record(struct kg_run *r, const struct kg_findings *f, enum kg_input_class cls, uint64_t seed,
		  const char *when);
/* Why a reference call failed, in words (its outcome, fault, message or the error). */
void kg_run_ref_failure(const struct kg_run *r, int rc, const kg_error *e, char *what, size_t n);
/* The device memory the candidate's process holds now, by kgate-device's count (mem_free: the
 * device's free memory just read): over the policy's gpu.memory_mb it is sandbox.memory, recorded
 * with when, and its process is ended (1); 0 within it or not known. */
int kg_run_dev_memory(struct kg_run *r, uint64_t mem_free, const char *when, enum kg_input_class cls, uint64_t seed,
		      int trial);
/* The reference failed (a call, or its runner): where the device's memory was short because the
 * candidate holds more than the policy gives it, that is sandbox.memory for the candidate (1, its
 * process ended); 0 otherwise (the failure is kgate's). */
int kg_run_ref_starved(struct kg_run *r);
/* The candidate's process ended: its reason from how it ended (or from what the parent caught it
 * doing, the session's fault). */
void kg_run_cand_ended(struct kg_run *r, const char *during, enum kg_input_class cls, uint64_t seed, int trial);
/* A command to the candidate's runner did not succeed (rc: a kg_session code, or negative for the
 * parent's own channel error): the reason it earns the candidate, or kgate's internal error. */
void kg_run_cand_failed(struct kg_run *r, int rc, const kg_error *e, const char *during, const char *cmd,
			enum kg_input_class cls, uint64_t seed, int trial);

#endif
