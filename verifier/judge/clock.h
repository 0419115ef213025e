/* The trusted clock (clock.c): the statistics of a series of timed calls, a lower bound on every
 * timed call from what the parent itself observes, which the reported time may never undercut,
 * and the judgement of the runner's claims against it; the quiet device's and the ceilings' tests,
 * and a batch's size. The timing phase itself (phases/timing.c) runs both sides on fresh inputs of
 * every class, interleaved with checked calls, and checks every output. */
#ifndef KG_CLOCK_H
#define KG_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "verifier/judge/verdict.h"

/* Median, p10, p90, min, max and spread of n samples (sorts ms in place). */
void kg_timing_stats(double *ms, int n, struct kg_timing *t);

/* One timed call as both sides saw it. */
struct kg_timed_call {
	uint64_t child_ns; /* the runner's claim */
	uint64_t parent_ns; /* the parent's round trip of RUN */
	uint64_t span_ns; /* the parent's clock from sending RUN to the outputs being back */
	uint64_t tail_ns; /* the device's claimed tail after the stream (named, never subtracted) */
	uint64_t snap_ns; /* devices: the least the keeper's own copies take (subtracted up to snap_cap_ns) */
	uint64_t cpu_ns; /* CPU time the kernel charged the runner over span_ns (when cpu_known) */
	int cpu_known;
	uint64_t thread_cpu_ns; /* with threads: the most any one thread was charged (when known) */
	int thread_known;
	uint32_t sets; /* devices: the calls the span holds (0 or 1: one) */
};

/* The session's calibration, on calls that did nothing, measured before the .so was loaded. */
struct kg_clock_cal {
	uint64_t run_ns; /* RUN round trip of a call that does nothing */
	uint64_t span_ns; /* devices: the keeper's span of such a call (nothing copied) */
	uint64_t cpu_ns; /* the runner's CPU time over such a call's span */
	int cpu_clock; /* the work runs on the CPU: the runner's CPU time bounds it */
	int par; /* threads the candidate may run at once (1 without threads) */
	uint64_t snap_cap_ns; /* devices: the most of snap_ns ever subtracted (no cap with a keeper) */
	/* devices, gated: what each further set of a batch adds to a call that does nothing (the
	 * keeper's handoffs between sets; calibrated before LOAD) */
	uint64_t set_ns;
	/* CPU: the CPU time the host added to a call of the trusted reference's runner, timed beside
	 * the candidate, beyond its own clock and a call that does nothing (the median over the timed
	 * calls; 0 when quiet): a busy host charges any runner that much, honest or not, so a
	 * shortfall within it is no lie */
	uint64_t host_noise_ns;
	/* how many times the slack and the least gap of a lie are widened: 4 under a sanitizer build
	 * (KGATE_SANITIZE), whose runners spend several times the CPU time of a production one on
	 * their own code around every call; 0 counts as 1 */
	unsigned noise_scale;
};

/* The trusted lower bound of one call's work, in ns. CPU backends: the CPU time the kernel charged
 * the runner over the call's span, less a call that does nothing (work hidden from the runner's
 * clock still costs CPU time; contention adds wall time but no CPU time). With threads (par > 1)
 * the largest of: that over par, the most one thread was charged less the same, and the RUN round
 * trip less a call that does nothing: a kernel that uses one thread, or threads one after another,
 * is not reported as if it had used every CPU. Devices: the
 * keeper's span (kgate-device: from the moment the call's inputs, staged in its private memory,
 * start to be copied onto the runner's device arena, to its own snapshot of the outputs, taken as
 * soon as the RUN reply is in) less a call that does nothing (its events and synchronisations, as in
 * every call: a runner that forges its reply skips them, and gains that, 10-40 us, the resolution of
 * this clock) and the least the keeper's copies and flush in it can take (at most snap_cap_ns). Whatever the candidate's process does or says,
 * work done on the device in between, on any stream, graph or context, is inside it. */
uint64_t kg_timing_bound(const struct kg_timed_call *c, const struct kg_clock_cal *cal);
/* The time a call is reported at: its claim, never below the trusted bound. */
uint64_t kg_timing_reported(const struct kg_timed_call *c, const struct kg_clock_cal *cal);

/* What the parent's clocks say of the runner's claims, over every timed call. */
struct kg_tamper {
	int impossible; /* first call whose claim exceeds the parent's round trip, -1 when none */
	int lies; /* calls whose claim falls well short of the trusted bound */
	int first_lie; /* -1 when none */
	uint64_t min_gap_ns; /* the smallest (bound - claim) over the calls that lie */
	int forged; /* the verdict: the claims contradict the parent's clocks */
};
void kg_timing_tamper(const struct kg_timed_call *calls, int n, const struct kg_clock_cal *cal, struct kg_tamper *t);
/* A claim below KG_TAMPER_SHARE of the CPU bound, less KG_TAMPER_SLACK_NS and the host's noise, is
 * a lie; lies in three quarters of the calls are forgery. A device bound (wall clock) is noisier: a
 * lie there is a gap of at least 1 ms and half the span, and only a lie in every call is forgery
 * (contention makes some). */
#define KG_TAMPER_SHARE 0.75
#define KG_TAMPER_SLACK_NS 50000u
/* On the CPU clock every lie must also hide at least this much, and twice the host's noise: a busy
 * 2-core host charges any runner, the reference's as much as the candidate's, tens to hundreds of
 * microseconds of CPU time beyond its own clock in a call (measured: median 48 and 58 us, p90 140
 * and 138 us, over 1010 calls of each under a parallel build), and at times in all five calls of a
 * short kernel; a forger hides its whole kernel in every call. */
#define KG_TAMPER_MIN_GAP_NS 150000u
#define KG_TAMPER_DEVICE_GAP_NS 1000000u
/* A batched measurement's length at the slower side's time for one call (timing_batch.c): an
 * ungated span's host latencies at its ends (~0.2 ms on an H200 host, ~0.1 ms of jitter), or a
 * gated batch's handoffs between sets (calibrated, subtracted), shared out among its calls; a gated
 * batch holds at most KG_DEV_MAX_GATED_SETS */
#define KG_BATCH_TARGET_MS 25.0
/* the fewest batched measurements the timing's figures (median, p10, p90) are taken over */
#define KG_BATCH_MIN_MEASURES 7
/* the most sets a batch takes where an output's tolerance is the reference's per element
 * (timing.c): each may cost a reference call on the host */
#define KG_BATCH_TERMS_SETS 8

/* The quiet device (kg_trial_ref_quiet, phases/trial_ref.c): the flush inside a reference's
 * measurement, a kernel on the compute engine of the keeper's, takes what it takes on the quiet
 * device unless another context's work ran beside it (time-sliced, or taking the memory's
 * bandwidth). Busy: more than
 * KG_QUIET_RATIO times the quiet flush plus KG_QUIET_SLACK_NS. A busy measurement of the reference
 * is taken again, up to KG_QUIET_RETAKES times with the candidate's process stopped; busy still, the
 * candidate's process is ended and the reference measured twice more: quiet then, the candidate's
 * work had been running (timing.tampered); busy still, the device is shared with work from outside
 * the run (not verified). A slowed reference is never a speedup. */
#define KG_QUIET_RATIO 1.3
#define KG_QUIET_SLACK_NS 10000u
#define KG_QUIET_RETAKES 4
/* 1 where a flush of flush_ns says the device was busy, against the quiet device's quiet_ns (0:
 * not known, and nothing is said) */
int kg_timing_busy(uint64_t flush_ns, uint64_t quiet_ns);

/* A measured ceiling the reported time cannot beat: bytes moved at the memory ceiling (GB/s,
 * bytes read plus written) or flops at the compute ceiling (GFLOP/s), each times par (threads the
 * candidate may run; a device's ceiling is the whole device: par 1). A reported time shorter than
 * either, by more than KG_CEILING_MARGIN, is work done outside the span the trusted side timed;
 * fills why and returns 1 then. Unknown ceilings (0) say nothing. */
#define KG_CEILING_MARGIN 2.0
int kg_timing_beyond_ceiling(double bytes, double flops, double ms, double gbps_ceiling, double gflops_ceiling,
			     int par, char *why, size_t whysz);

/* Batched timed calls on a device (timing_batch.c): the sets of `stride` bytes each device arena
 * is given room for on a device of mem_bytes (0: too few to batch), and how many of them one
 * measurement takes for calls of call_ms each, to fill target_ms (1: no batch). */
uint32_t kg_timing_batch_room(uint64_t mem_bytes, uint64_t stride);
uint32_t kg_timing_batch_sets(double call_ms, uint32_t room, double target_ms);

#endif
