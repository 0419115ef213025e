/* A run session: one kgate-run process in the sandbox hosting one .so (a candidate or a
 * reference), driven over the control socket. Everything the runner reports is only a claim; the
 * session adds the parent's own measurements next to it. */
#ifndef KG_SESSION_H
#define KG_SESSION_H

#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#include "kg_common.h"
#include "kg_gen.h"
#include "runner/wire.h"
#include "sandbox/sandbox.h"
#include "verifier/arena/arena.h"
#include "verifier/plan/backend.h"

struct kg_keeper;

/* A call's inputs as the generator's draws (common/kg_gen.h): tensor i of t is input slot i. */
struct kg_call_draw {
	uint32_t key[8];
	int n;
	struct kg_gen_tensor t[KG_ARENA_MAX_SLOTS];
};

struct kg_session_opts {
	const struct kg_backend *be; /* the runner's backend and its sandbox data */
	const char *so_path; /* host path of the .so to load (an interpreted candidate's extensions) */
	/* An interpreted runner hosting a candidate: the candidate's module (host path); NULL for a
	 * reference or a .so. */
	const char *cand_module;
	/* A torch runner's state file (torchtask.h: the constructor's arguments as data, the Model's
	 * entries, its kept buffers), shown to the reference beside its module and to a candidate in
	 * place of it; NULL for kgate-run. */
	const char *state_file;
	struct kg_sb_limits limits;
	unsigned required_layers;
	unsigned disabled_layers;
	int threads;
	double call_timeout_s; /* per command; the sandbox's wall limit bounds the whole session */
	/* Runs the runner under a tool (compute-sanitizer): its argv up to the runner, NULL-ended.
	 * The runner then also gives each tensor an exact-size buffer and names the tool's sockets
	 * to its filter. */
	const char *const *tool_argv;
	/* The candidate's session: a watched sandbox (sandbox.h), distrusted before LOAD, and its
	 * process's threads held to those it had at HELLO but the loader (all of them, with
	 * threads), counted from outside whenever it is stopped. */
	int watched;
	/* A device backend's verified runs: kgate-device, which owns the device arena (attached at
	 * start), writes each call's inputs, keeps its clock and snapshots its outputs. Required for
	 * every device session but one under a tool (exact buffers, copied by the runner). */
	struct kg_keeper *keeper;
	/* With the keeper: room on the device for a batched call's dev_sets sets of dev_stride bytes
	 * (0: the arena's size) */
	uint32_t dev_sets;
	uint64_t dev_stride;
	/* A Python runner on a device (be->script_filters_itself): a trusted baseline's runner applies
	 * no run filter (torch.compile starts compiler processes); every other one must have applied it
	 * before HELLO, which the parent checks from outside. */
	int unfiltered;
	/* With the keeper: 1 + the slot whose device arena this session takes over (exported again;
	 * its last runner must be gone), instead of attaching its host arena afresh; 0: attach */
	int take_slot;
	/* A Python runner on a device: the run's JIT cache (Triton's, inductor's), a directory kgate
	 * made for this run, shown at /kgate/jit (read-only, or writable where jit_rw), NULL: none */
	const char *jit_dir;
	int jit_rw;
};

struct kg_session {
	struct kg_sb_child *sb;
	int ctl;
	uint64_t seq;
	struct kg_arena *arena;
	struct kg_sb_outcome outcome;
	int ended;
	double call_timeout_s;
	int linger_ms; /* how long the process may take to end after QUIT before it is killed */
	uint64_t nop_ns; /* median round trip of a NOP, measured before LOAD */
	/* The trusted clock's calibration, on calls that do nothing (RUN before LOAD), before any
	 * untrusted code is in the runner: medians of the RUN round trip, of the span from sending
	 * RUN to the DOWNLOAD reply, and of the runner's CPU time over that span. */
	uint64_t cal_run_ns, cal_span_ns, cal_cpu_ns;
	pid_t runner_pid; /* from the kernel (SCM_CREDENTIALS on HELLO), 0 when unknown */
	clockid_t cpu_clock; /* the runner process's CPU-time clock, when has_cpu_clock */
	int has_cpu_clock;
	int sealed; /* the runner sealed itself after LOAD: no opens, no new code */
	uint64_t ceiling_mbps; /* the runner's measured bandwidth ceiling (HELLO), 0 when none */
	uint32_t l2_flags; /* KG_RUN_L2_* over every call so far (the runner undid each) */
	char msg[400]; /* the runner's message for the last failed command (its claim, escaped later) */
	/* The runner's process, stopped by the parent whenever no command is outstanding: nothing in it
	 * runs between commands, and its threads are counted while it holds still. */
	struct kg_sb_process *proc;
	int host; /* the backend computes on the host: a RUN's span ends when the process is stopped */
	int watched, threads;
	int n_allowed; /* watched: the threads it may have once loaded (HELLO's, the loader gone) */
	pid_t allowed[64];
	pid_t loader; /* the loader thread, as the parent sees it; 0 when none */
	int loaded; /* LOAD was answered */
	/* What the parent saw the process do that the protocol or its rules forbid (a second reply,
	 * a malformed one, a thread too many): the candidate's fault, with its reason code; the
	 * process is killed at once. KG_SESSION_FAULT. */
	int fault_code; /* a kg_reason_code; 0: none */
	char fault[400];
	struct kg_keeper *keeper; /* the device arena's owner (kg_session_opts), NULL when none */
	int dev_slot; /* this session's arena in the keeper */
	/* After the last call's END or SETTLE: the keeper found everything before the outputs (the
	 * inputs, their guard bands) as it staged them, and left the host arena's copy as it was
	 * (which, for inputs drawn on the device, holds nothing of them); 0: the host arena has
	 * the device's bytes, to be checked there. */
	int inputs_same;
	uint64_t in_diff; /* where not inputs_same after a keeper's END: the first byte that differs */
	/* Gated calls (device/wire.h's gate page, shared with this runner): each call's ends marked on
	 * the device. Off where the keeper cannot, where KGATE_NO_GATE=1, or where the trusted
	 * runner's calibration before LOAD did not see its marks come (gate_off says why). */
	int gated;
	char gate_off[120];
	/* gated: what each further set of a batch adds to a call that does nothing (calibrated on
	 * batches of KG_CAL_SETS before LOAD); the flush's time in the calibration's flushed calls */
	uint64_t cal_set_ns, cal_flush_ns;
	/* a watched runner on a device: the device's free memory before LOAD (the baseline of
	 * kgate's count of what the candidate holds) and after it; 0: not known */
	uint64_t dev_free0, dev_free_load;
	uint32_t dev_sets; /* the opts' room for a batch (the gated calibration's batches need it) */
	uint64_t dev_stride;
	int must_filter; /* a runner that applies its own run filter: checked in place before LOAD */
};

enum {
	KG_SESSION_OK = 0,
	KG_SESSION_ENDED = 1, /* the runner died or was killed: see outcome */
	KG_SESSION_FAILED = 2, /* the runner answered with an error status: see msg */
	KG_SESSION_FAULT = 3, /* the parent caught the process breaking the protocol: fault_code, fault */
};

/* Starts the runner, waits for HELLO, loads the .so. On a runner-side failure (dlopen, ABI,
 * the process dying during load) returns KG_SESSION_ENDED/FAILED with the details filled;
 * negative errno only for infrastructure failures. */
int kg_session_start(struct kg_session *s, const struct kg_session_opts *o, struct kg_arena *a, kg_error *e);
/* Sends SETUP for the arena's current layout. */
int kg_session_setup(struct kg_session *s, kg_error *e);
/* Whether kgate-device stages this session's calls itself (its outputs' poison, and inputs drawn or
 * copied on the device): a keeper's session whose layout fits one START (KG_DEV_MAX_RANGES
 * tensors). Else every byte comes from the host arena, where the caller writes inputs and poison. */
int kg_session_dev_stages(const struct kg_session *s);
/* START's plan for call c of s (loaded, its arena at the call's layout): the outputs' poison and the
 * inputs drawn or copied on the device, as kg_session_run_call sends it; -EINVAL (e says why) for a
 * draw that is not of the arena's layout. */
struct kg_keeper_stage;
struct kg_call;
int kg_session_stage_plan(const struct kg_session *s, const struct kg_call *c, struct kg_keeper_stage *st, kg_error *e);
/* A device command after the call (kgate-device's checks) ran out of time: work the candidate left
 * running holds the device. Its process is killed for it (the sandbox's timeout), which ends that
 * work; KG_SESSION_ENDED, outcome filled. */
int kg_session_kill_held(struct kg_session *s);
/* With a keeper that compares on the device (KG_DEV_CAP_CMP): after delay_ms, is the device arena
 * what the last call's START staged and its END snapshotted? 0 the same, 1 not (*diff_off: from
 * which byte, to 8), KG_SESSION_ENDED (the device held past its deadline: killed), or a negative
 * errno (no such keeper: -ENOTSUP). The runner's process stays stopped; nothing is copied. */
int kg_session_look(struct kg_session *s, uint32_t delay_ms, uint64_t *diff_off, kg_error *e);
/* One command; arg is SETTLE's delay in ms, RUN's entry (KG_ENTRY_*), 0 otherwise. *r gets the
 * reply; *parent_ns (optional) the parent's round-trip time. */
int kg_session_call(struct kg_session *s, enum kg_wire_op op, uint32_t arg, struct kg_wire_reply *r,
		    uint64_t *parent_ns, kg_error *e);

/* One call of the hosted .so on the arena as it is now: UPLOAD, FLUSH (when asked), RUN,
 * DOWNLOAD, stopping at the first step that fails. The reference, the candidate and the
 * sanitized runs all go through here. */
struct kg_call {
	int flush; /* evict caches first (timed calls; devices: a host arena is written cold anyway) */
	double run_timeout_s; /* limit for RUN alone; 0: the session's call_timeout_s */
	uint32_t entry; /* KG_ENTRY_FORWARD, or KG_ENTRY_TERMS of a task's reference */
	/* Writes the call's inputs into the arena. A host backend's span (its CPU-time clock) starts
	 * before it: the inputs are readable in the runner's process only once the clock runs, so no
	 * work on them can be done earlier. NULL: they are in place already. */
	void (*expose)(void *arg);
	void *expose_arg;
	/* With kgate-device: 1 + the keeper slot whose staged copy of this call's inputs (the same
	 * inputs at the same offsets: the reference's call on them) the keeper copies on the device
	 * instead of taking them from the host arena; 0: from the host arena (expose wrote them) */
	int inputs_from;
	/* With kgate-device (KG_DEV_CAP_GEN) and inputs_from 0: the inputs drawn on the device, the
	 * arena's input slots from these draws under key; NULL: from the host arena */
	const struct kg_call_draw *draw;
	/* With kgate-device: the outputs stay on the device at END (KG_DEV_CAP_CHECK judges them
	 * there); the host arena does not get them */
	int keep;
	/* With kgate-device (every capability): a batched call, sets > 1 input sets stride bytes
	 * apart staged on the device (the arena's layout in each, the draw's under each set's key),
	 * called back to back in one RUN; judged on the device only (the outputs kept, END's look
	 * over every set's image in inputs_same). 0 or 1: one call. */
	uint32_t sets;
	uint64_t stride;
	/* Host backends: probe_ns after RUN is sent, if no reply came yet, the process is stopped,
	 * probe runs on its memory as it is mid-call, and it resumes (0: no probe). What it finds is
	 * the caller's; the stop costs the process no CPU time. */
	uint64_t probe_ns;
	void (*probe)(void *arg);
	void *probe_arg;
	/* With kgate-device and a gated call: probe_ns after the call's release on the device's
	 * clock, kgate-device captures the inputs and the bands after the outputs (a keyed window of
	 * KG_DEV_PROBE_MAX where they are larger), compared at END (the result's dev_probe_*) */
};
struct kg_call_result {
	const char *step; /* where it stopped: "upload", "run", "download"; NULL when done */
	int32_t ret; /* what kg_forward returned */
	uint64_t child_ns; /* the runner's claim for the call (its clock: a claim only) */
	uint64_t parent_ns; /* the parent's round trip of RUN */
	uint64_t download_ns; /* the parent's round trip of DOWNLOAD */
	uint64_t span_ns; /* host: from before the inputs were written to the process stopped after RUN;
			   * devices: the keeper's, from the start of the inputs' copy onto the device arena
			   * to its snapshot of the outputs, on the device's clock where it measured one */
	uint64_t host_span_ns; /* devices: the same span on the host's clock (the keeper's replies) */
	uint64_t tail_ns; /* how long the device stayed busy after the call's stream (runner's claim) */
	uint64_t snap_ns; /* devices: the least the keeper's own copies and flush inside span_ns can take
			   * (their bytes at the measured copy ceiling): not the candidate's */
	uint64_t copy_ns; /* devices: that snapshot's duration as the keeper's events measured it */
	uint32_t l2_flags; /* KG_RUN_L2_*: persisting-L2 changes the runner found and undid */
	/* The CPU time the kernel charged the runner's process over span_ns (host: from before the
	 * inputs were written to the stop; trusted: the candidate cannot forge it); valid when
	 * cpu_known. */
	uint64_t cpu_ns;
	int cpu_known;
	int probed; /* the probe ran, mid-call */
	/* host, with threads: the most CPU time one thread of the process was charged over the span
	 * (threads alive at both ends; one started since counts whole); valid when thread_known */
	uint64_t thread_cpu_ns;
	int thread_known;
	/* devices: the call's sets (1: one call); a gated call's marks (device/wire.h's enum
	 * kg_dev_gate_state, gate_set the set whose DONE never came); the flush's time on the keeper's
	 * events (median and most over the sets; 0: not timed), the quiet-device probe; the mid-call
	 * probe's finding (kg_dev_in_state, an arena offset); the device's free memory before START's
	 * staging and after END (0: not known) */
	uint32_t sets, gate, gate_set;
	uint64_t flush_ns, flush_max_ns;
	uint32_t dev_probe_state;
	uint64_t dev_probe_diff;
	uint64_t mem_free_start, mem_free_end;
};
/* KG_SESSION_OK, KG_SESSION_ENDED (see outcome), KG_SESSION_FAILED (see msg), or a negative errno
 * for the channel itself (e says why). */
int kg_session_run_call(struct kg_session *s, const struct kg_call *c, struct kg_call_result *r, kg_error *e);
/* QUIT, wait, reap. Fills outcome. */
void kg_session_close(struct kg_session *s);
/* Close, then free the sandbox child (the outcome's output goes with it). */
void kg_session_free(struct kg_session *s);

#endif
