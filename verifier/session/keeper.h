/* kgate's side of kgate-device (device/keeper.c), the trusted process that owns the GPU's memory
 * for a run: started once per run, it mirrors each runner's host arena on the device, and the
 * session (session.c) asks it for every call's start (inputs on the device, L2 flushed,
 * the clock started) and end (the outputs' snapshot, the clock stopped, the host arena refreshed).
 * Calls from several threads are serialised here. */
#ifndef KG_SESSION_KEEPER_H
#define KG_SESSION_KEEPER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kg_common.h"
#include "device/wire.h"

struct kg_keeper {
	pid_t pid;
	int ctl;
	uint64_t seq;
	pthread_mutex_t mu;
	uint64_t ceiling_mbps; /* device-to-device copy, bytes read plus written (measured by the keeper) */
	uint64_t l2_bytes, granularity;
	uint64_t flush_bytes; /* what each flushed START writes inside the span */
	uint32_t caps; /* KG_DEV_CAP_*: its own kernels (inputs drawn and compared on the device) */
	uint64_t mem_bytes; /* the device's memory (0: not known) */
	uint64_t mem_free; /* the device's free memory at HELLO (0: not known) */
	uint64_t quiet_flush_ns; /* a flush's time on the quiet device, measured at its start (0: none) */
	/* per slot, its last START's sets and stride (wire.h): END and SETTLE's look of the same call
	 * say the same */
	uint32_t sets[KG_DEV_MAX_SLOTS];
	uint64_t stride[KG_DEV_MAX_SLOTS];
	int dead; /* it failed to answer once: every later call fails at once */
	int up; /* kg_keeper_start ran: there is a socket, a lock, perhaps a process */
};

/* Starts kgate-device at path (kg_path_device) and waits for its HELLO. */
int kg_keeper_start(struct kg_keeper *k, const char *path, kg_error *e);
/* Hands the keeper a host arena (a memfd of `bytes`); *dev_fd gets the exported device mirror's
 * fd (the caller's to pass on and close), *dev_bytes its size, *slot the keeper's index for it.
 * The mirror holds at least `sets` sets of `stride` bytes (a batched call's, wire.h; sets 0 or 1:
 * the host arena's size). */
int kg_keeper_attach(struct kg_keeper *k, int host_fd, size_t bytes, uint32_t sets, uint64_t stride, int *slot,
		     int *dev_fd, size_t *dev_bytes, kg_error *e);
/* EXPORT: slot's device arena exported again (*dev_fd, the caller's; *dev_bytes its size), for a
 * runner that takes the slot over; only once the slot's last runner is gone. */
int kg_keeper_export(struct kg_keeper *k, int slot, int *dev_fd, size_t *dev_bytes, kg_error *e);
/* What START stages on the device rather than from the host arena (wire.h's ranges): outputs
 * poisoned there, inputs drawn there (under key) or copied from another slot's staged copy
 * (src_slot's). */
struct kg_keeper_stage {
	int n;
	int src_slot;
	uint32_t key[8];
	struct kg_dev_range range[KG_DEV_MAX_RANGES];
	/* a batched call (wire.h): sets > 1 copies of the plan, stride bytes apart, each set's draws
	 * under its own key; END and the look that follow cover every set, and END keeps the outputs */
	uint32_t sets;
	uint64_t stride;
	/* a gated call (KG_DEV_CAP_GATE, kg_keeper_gate on the slot): [out_lo, out_hi) its outputs,
	 * each set's snapshot queued at START; with probe_ns, the mid-call probe of up to two ranges
	 * (wire.h) */
	int gate;
	uint64_t out_lo, out_hi;
	uint64_t probe_ns, probe_off[2], probe_bytes[2];
};

/* What START answered: t0 (CLOCK_MONOTONIC ns, after the staging), a gated call's first token (the
 * runner's RUN carries it), the device's free memory before the staging. */
struct kg_keeper_begun {
	uint64_t t0;
	uint32_t tok;
	uint64_t mem_free;
};

/* START: the inputs staged (st, or NULL: the host arena's first `bytes` alone), then t0, then
 * their copy onto the device arena and the flush: answered once they are on it; a gated call's
 * steps are queued instead, and START answers at once. */
int kg_keeper_begin(struct kg_keeper *k, int slot, size_t bytes, int flush, const struct kg_keeper_stage *st,
		    struct kg_keeper_begun *out, kg_error *e);
/* The START record kg_keeper_begin sends (st may be NULL: all from the host arena). */
void kg_keeper_start_cmd(int slot, size_t bytes, int flush, const struct kg_keeper_stage *st, struct kg_dev_cmd *c);
/* GATE: the slot's gate page (a memfd of KG_DEV_GATE_BYTES, which the slot's runner maps too);
 * -ENOTSUP where gated calls do not work on this device. */
int kg_keeper_gate(struct kg_keeper *k, int slot, int page_fd, kg_error *e);
/* MEMINFO: the device's free memory now. */
int kg_keeper_meminfo(struct kg_keeper *k, uint64_t *mem_free, kg_error *e);
/* What END measured and found: t_ns the moment the outputs were snapshotted (CLOCK_MONOTONIC),
 * copy_ns the snapshot's own duration, dev_ns the device's clock from START's copy onto the mirror
 * to the snapshot's completion (0: not measured), in_state the inputs' (enum kg_dev_in_state). */
struct kg_keeper_ended {
	uint64_t t_ns, copy_ns, dev_ns;
	uint32_t in_state;
	uint64_t in_diff; /* KG_DEV_IN_DIFFERS: the first differing byte's offset (to 8) */
	/* a gated call's marks (enum kg_dev_gate_state; gate_set: the set whose DONE never came) */
	uint32_t gate, gate_set;
	/* the flush's time (median and most over the sets; 0: not timed), the mid-call probe's
	 * finding (probe_state, an arena offset in probe_diff), the device's free memory after */
	uint64_t flush_ns, flush_max_ns;
	uint32_t probe_state;
	uint64_t probe_diff;
	uint64_t mem_free;
};
/* END (sent as soon as the runner's RUN reply is in): the outputs [out_lo, out_hi) snapshotted
 * (*out); the host arena's first `bytes` then hold the mirror, outputs from the snapshot. in_hi
 * (<= out_lo; 0: none): [0, in_hi) is compared on the device with what START staged there, and
 * left as it was in the host arena where it is the same (out->in_state says which). */
int kg_keeper_end(struct kg_keeper *k, int slot, size_t bytes, uint64_t out_lo, uint64_t out_hi, uint64_t in_hi,
		  int keep, struct kg_keeper_ended *out, kg_error *e);
/* keep (END): the outputs stay in the snapshot, not copied to the host arena (CHECK judges them
 * there, kg_keeper_fetch brings them). */
/* CHECK (KG_DEV_CAP_CHECK): n outputs of slot's last snapshot judged on the device, against
 * src_slot's last snapshot (COMPARE) or alone (STATS); out[i] gets check i's figures. */
int kg_keeper_check(struct kg_keeper *k, int slot, int src_slot, const struct kg_dev_check *chk, int n,
		    struct kg_dev_cmp *out, kg_error *e);
/* FETCH: [lo, hi) of slot's last snapshot into its host arena. */
int kg_keeper_fetch(struct kg_keeper *k, int slot, size_t bytes, uint64_t lo, uint64_t hi, kg_error *e);
/* FETCH of a batch's set (wire.h): [lo, hi) of that set's snapshot into the host arena's [lo, hi). */
int kg_keeper_fetch_set(struct kg_keeper *k, int slot, size_t bytes, uint64_t lo, uint64_t hi, uint32_t set,
			kg_error *e);
/* SETTLE: after delay_ms, the mirror's first `bytes` into the host arena as they are now (but for
 * [0, in_hi) where it is the same as staged, as END). */
int kg_keeper_settle(struct kg_keeper *k, int slot, size_t bytes, uint32_t delay_ms, uint64_t in_hi,
		     uint32_t *in_state, kg_error *e);
/* SETTLE's look: after delay_ms, the whole device arena compared with what START staged and END
 * snapshotted, nothing copied: *in_state KG_DEV_IN_SAME, or DIFFERS from byte *diff on (to 8). */
int kg_keeper_look(struct kg_keeper *k, int slot, size_t bytes, uint32_t delay_ms, uint32_t *in_state, uint64_t *diff,
		   kg_error *e);
/* QUIT, reap; safe on a keeper never started. */
void kg_keeper_stop(struct kg_keeper *k);

#endif
