/* The protocol between kgate (the verifier) and kgate-device, the trusted process that owns the
 * GPU's memory for a run: fixed-size records over a SOCK_SEQPACKET pair, file descriptors beside
 * them (SCM_RIGHTS). Both ends are trusted; no candidate's process ever holds this channel. */
#ifndef KG_DEVICE_WIRE_H
#define KG_DEVICE_WIRE_H

#include <stdint.h>

#include "kg_gen.h"

#define KG_DEV_MAGIC 0x6b676456u /* "kgdV" */
#define KG_DEV_CTL_FD 3 /* the keeper's end, where it finds it at start */
#define KG_DEV_MAX_SLOTS 4 /* device arenas one keeper holds: a reference's and a candidate's */
#define KG_DEV_MAX_RANGES 16 /* START's tensors staged from elsewhere than the host arena */
#define KG_DEV_MAX_CHECKS 32 /* CHECK's outputs judged at once */
#define KG_DEV_MAX_SETS 1024 /* a batched call's input sets (START's sets) */
/* a gated batch's sets: every set's steps are queued on the keeper's stream at START, before the
 * runner is told to run, and a queue that filled up there would wait for a runner not yet started */
#define KG_DEV_MAX_GATED_SETS 64
/* how long the ends of a timed call wait for each other by polling rather than sleeping (kgate for
 * START's and END's replies and the runner's RUN reply, kgate-device for the END after a START):
 * a sleeping thread's wake-up inside the span is ~10-50 us of jitter on a busy host */
#define KG_SPIN_NS 100000000ull

/* How START stages one range of the arena instead of copying it over the bus from the host arena:
 * a poisoned output is a pattern the device writes itself (a gigabyte the host need not write nor
 * send), and a candidate's input may be the reference's copy of the same trial's input, already
 * staged in the reference's private memory at the same offset (a device-to-device copy). */
enum kg_dev_range_kind {
	KG_DEV_R_FILL = 1, /* `pattern`'s low `elem` bytes (1, 2, 4 or 8), repeated */
	KG_DEV_R_SLOT, /* the same offsets of src_slot's private buffer */
	/* the generator's draw `gen` under the command's key, made on the device (KG_DEV_CAP_GEN):
	 * a trial's input the host need not draw nor send */
	KG_DEV_R_GEN,
};

struct kg_dev_range {
	uint64_t off, bytes;
	uint64_t pattern; /* FILL */
	uint32_t kind, elem;
	struct kg_gen_tensor gen; /* GEN */
};

/* HELLO's caps: what the keeper's own kernels (device/kernels.cu) let it do */
#define KG_DEV_CAP_GEN 1u /* START's GEN ranges */
#define KG_DEV_CAP_CMP 2u /* END's and SETTLE's in_hi: the inputs compared on the device */
#define KG_DEV_CAP_CHECK 4u /* CHECK and FETCH: outputs judged on the device */
#define KG_DEV_CAP_GATE 8u /* gated calls (GATE, START's gate): each call's ends marked on the device */

/* The gate page of a slot: 4 KiB of a memfd kgate makes (GATE), mapped and registered for device
 * access by the keeper and by the slot's runner (runner/wire.h's KG_WIRE_GATE_FD), three words on
 * lines of their own. A gated call's tokens are START's gate_tok + k for set k: the runner stores
 * ARMED (from the CPU) once it has queued the call, its stream waits for RELEASED >= the set's token
 * before the set's work and writes DONE = the token after it; the keeper's stream waits for ARMED,
 * starts the clock, copies set k's inputs onto the mirror, flushes, writes RELEASED, waits for DONE
 * and snapshots set k's outputs before it copies set k + 1's inputs. No set's inputs are on the
 * mirror before the set before it is snapshotted: one call cannot do another set's work, and the
 * span on the device's clock holds no host latency at either end. Words compare cyclically. */
#define KG_DEV_GATE_BYTES 4096u
#define KG_DEV_GATE_ARMED 0u /* byte offsets in the page */
#define KG_DEV_GATE_RELEASED 128u
#define KG_DEV_GATE_DONE 256u
/* how long END waits for a gated call's last snapshot before it marks what never came itself: an
 * honest runner marked every set done before its reply, and only the snapshot's copy is left */
#define KG_DEV_GATE_GRACE_MS 1000u
/* the most a mid-call probe captures (START's probe ranges together) */
#define KG_DEV_PROBE_MAX (64ull << 20)

/* END's word on a gated call's marks (reply's gate) */
enum kg_dev_gate_state {
	KG_DEV_GATE_NONE = 0, /* not gated */
	KG_DEV_GATE_OK, /* every mark came: the span is the device's, from ARMED to the last snapshot */
	KG_DEV_GATE_NO_ARM, /* the runner never stored ARMED: nothing ran; the keeper stored it at END */
	KG_DEV_GATE_NO_DONE, /* set gate_set's DONE never came: the keeper stored it at END, and
			      * snapshotted what was there then */
};

/* One output CHECK judges, in the snapshots END left in private memory: the candidate's (slot)
 * against the reference's (src_slot) as verifier/judge/compare.c does (COMPARE), or the reference's
 * alone (STATS). */
enum kg_dev_check_mode {
	KG_DEV_CHK_COMPARE = 1,
	KG_DEV_CHK_STATS,
};

struct kg_dev_check {
	uint64_t off, ref_off, n; /* the output in each arena, elements of dtype */
	uint64_t poison; /* COMPARE: the candidate's pattern (unwritten); STATS: the reference's */
	uint64_t row; /* COMPARE: factor: row's length (0: none) */
	double atol, rtol, cap; /* COMPARE: the trial's bound; cap: the row factor's */
	double c[2]; /* STATS with near: count the elements not within atol/rtol of c[0], of c[1] */
	uint32_t dtype, mode;
	uint32_t near, pad;
};

/* What CHECK found for one output: compare.h's struct kg_cmp before its normwise figures (the sums
 * added in another order than the host's: their last bits may differ), the first unwritten
 * element and a hash of the candidate's output (the shortcut check's); for STATS, the finite elements' sum and sum of squares and count, the first element
 * holding the poison, and the counts not near c[0], c[1]. */
struct kg_dev_cmp {
	int64_t n, n_bad, n_nan, n_inf, first_bad, first_nan;
	int64_t max_abs_idx, max_rel_idx, tol_used_idx, first_unwritten;
	double first_bad_got, first_bad_exp, max_abs_err, max_abs_got, max_abs_exp, max_rel_err;
	double err_sq, ref_sq, res_sq, factor_max, tol_used;
	double sum, sum_sq;
	int64_t n_finite, first_poison, far[2];
	uint64_t hash; /* COMPARE: the candidate's output's contents, kg_judge_mix summed (any order) */
};

/* END's and SETTLE's verdict on [0, in_hi) (reply's in_state) */
enum kg_dev_in_state {
	KG_DEV_IN_UNCHECKED = 0, /* not compared: the host arena got it from the mirror */
	KG_DEV_IN_SAME, /* the mirror's equals the staged copy: the host arena's left as it was */
	KG_DEV_IN_DIFFERS, /* it does not (from in_diff on): the host arena got the mirror's */
};

enum kg_dev_op {
	KG_DEV_HELLO = 1, /* keeper -> kgate once its context is up: the device's figures */
	/* fd: a host arena (memfd) of `bytes`; the keeper maps it, creates its device mirror (one
	 * exportable allocation) and a private snapshot, and answers with the mirror's fd, for the
	 * runner that will import it */
	KG_DEV_ATTACH,
	/* the call's start: the host arena's first `bytes` (inputs, poisoned outputs, guard bands)
	 * staged in private device memory, persisting-L2 state undone, then t_ns (the call's clock
	 * starts there), the copy onto the mirror and the L2 flush (`flush`) after it; answered once
	 * all of it is done */
	KG_DEV_START,
	/* the call's end, sent the moment the runner's RUN reply is in (its process is stopped after,
	 * while this runs): snapshot [out_lo, out_hi) of the mirror into memory only the keeper maps;
	 * t_ns is the moment the snapshot is complete (the call's clock stops there), copy_ns its own
	 * duration; then the host arena gets the mirror's first `bytes`, outputs from the snapshot */
	KG_DEV_END,
	/* after delay_ms, the mirror's first `bytes` as they are now (what work left running wrote) */
	KG_DEV_SETTLE,
	KG_DEV_QUIT,
	/* after END: checks[] judged on the device (KG_DEV_CAP_CHECK), one kg_dev_cmp each */
	KG_DEV_CHECK,
	/* [out_lo, out_hi) of the slot's snapshot into its host arena (what END's keep left there);
	 * of a batch's set `sets` (0: the first), at the same offsets of the host arena */
	KG_DEV_FETCH,
	/* fd: the slot's gate page (KG_DEV_GATE_BYTES of a memfd): mapped and registered for device
	 * access; answered with status 0 where gated calls work on this device (KG_DEV_CAP_GATE) */
	KG_DEV_GATE,
	/* the device's free memory now (reply's mem_free): kgate's count of what the candidate holds */
	KG_DEV_MEMINFO,
	/* a slot's device arena exported again (a new fd, the reply's), for a runner that takes the
	 * slot over once kgate has ended the one before: the same memory, the same room for a batch */
	KG_DEV_EXPORT,
};

struct kg_dev_cmd {
	uint32_t magic, op;
	uint64_t seq;
	uint32_t slot;
	uint32_t flush; /* START */
	uint64_t bytes; /* ATTACH: the host arena's size; START/END/SETTLE: bytes in use */
	uint64_t out_lo, out_hi; /* END */
	uint32_t delay_ms; /* SETTLE */
	/* START: the ranges (sorted, disjoint, within bytes) staged on the device; every other byte
	 * of [0, bytes) comes from the host arena */
	uint32_t n_ranges;
	uint32_t src_slot; /* KG_DEV_R_SLOT's */
	uint32_t key[8]; /* KG_DEV_R_GEN's: the trial's input key */
	/* END, SETTLE: [0, in_hi) (below out_lo) is compared on the device with what START staged,
	 * and not copied to the host arena where it is the same (0: copied, not compared) */
	uint64_t in_hi;
	/* SETTLE: 1: after delay_ms, the whole [0, bytes) compared with what START staged and END
	 * snapshotted (in_state, in_diff), and nothing copied to the host arena */
	uint32_t look;
	/* END: 1: the outputs stay in the snapshot, [out_lo, out_hi) not copied to the host arena
	 * (CHECK judges them there; FETCH brings them when needed) */
	uint32_t keep;
	struct kg_dev_range range[KG_DEV_MAX_RANGES];
	/* START, END: a batched call's sets (0 or 1: one). START stages set 0 as above in [0, bytes)
	 * and each set k < sets the same at k * stride (stride >= bytes), but for its GEN ranges,
	 * drawn under kg_gen_set_key(key, k), and its SLOT ranges, from the source's set k; END
	 * snapshots [out_lo, out_hi) of every set, compares the whole image, [0, (sets - 1) * stride +
	 * bytes), with what START staged and the snapshot (in_state, in_diff; in_hi unused) and keeps
	 * the outputs on the device (keep). ATTACH: the device arena holds at least this many sets of
	 * `stride` bytes. */
	uint32_t sets;
	uint32_t pad1;
	uint64_t stride;
	uint32_t n_checks; /* CHECK */
	uint32_t pad2;
	struct kg_dev_check check[KG_DEV_MAX_CHECKS];
	/* START: 1: a gated call (KG_DEV_CAP_GATE, the slot's gate page attached): out_lo and out_hi
	 * are START's too (each set's snapshot is queued at START), at most KG_DEV_MAX_GATED_SETS sets,
	 * the flush (when asked) before every set's release and timed on the keeper's events */
	uint32_t gate;
	uint32_t pad3;
	/* START of a gated call: the mid-call probe, probe_ns after the first set's release on the
	 * device's clock (a copy of that length on a stream of the keeper's own), [probe_off[i],
	 * + probe_bytes[i]) of the mirror captured into private memory; END compares the capture with
	 * what START staged (probe_state): a byte used as scratch and restored within the call is seen
	 * where the capture landed in its use. 0: none. */
	uint64_t probe_ns;
	uint64_t probe_off[2], probe_bytes[2];
};

struct kg_dev_reply {
	uint32_t magic, op;
	uint64_t seq;
	int32_t status; /* 0, or a negative errno (msg says why) */
	uint32_t slot; /* ATTACH */
	uint64_t dev_bytes; /* ATTACH: the mirror's size (granularity-rounded) */
	uint64_t t_ns; /* START, END: CLOCK_MONOTONIC, see the ops */
	uint64_t copy_ns; /* END: the outputs' snapshot by the keeper's events */
	/* END: the device's clock from START's copy onto the mirror to the snapshot's completion, by
	 * the keeper's events (0: not measured): the call's span without host-side waits at its ends */
	uint64_t dev_ns;
	uint64_t ceiling_mbps; /* HELLO: device-to-device copy, bytes read plus written, MB/s */
	uint64_t l2_bytes, granularity; /* HELLO */
	uint64_t flush_bytes; /* HELLO: what a START's L2 flush writes */
	uint64_t mem_bytes; /* HELLO: the device's memory */
	uint32_t caps; /* HELLO: KG_DEV_CAP_* */
	uint32_t in_state; /* END, SETTLE: enum kg_dev_in_state */
	uint64_t in_diff; /* END, SETTLE: the first differing byte's offset (to 8 bytes) */
	char msg[300];
	struct kg_dev_cmp cmp[KG_DEV_MAX_CHECKS]; /* CHECK */
	uint32_t gate_tok; /* START, gated: set k's token is gate_tok + k */
	uint32_t gate; /* END: enum kg_dev_gate_state */
	uint32_t gate_set; /* END, NO_DONE: the set whose DONE never came */
	uint32_t probe_state; /* END: the mid-call capture against the staged copy (kg_dev_in_state) */
	uint64_t probe_diff; /* END, probe DIFFERS: the first differing byte's arena offset (to 8) */
	/* END: the flush's time on the keeper's events, the median and the most over the sets
	 * (0: not measured); HELLO: a flush's time on the quiet device, measured at start. A flush
	 * slower than on the quiet device ran beside work of another context's. */
	uint64_t flush_ns, flush_max_ns;
	/* HELLO, START (before its staging), END (after everything), MEMINFO: the device's free
	 * memory as the keeper reads it (0: not known) */
	uint64_t mem_free;
};

static inline const char *kg_dev_op_name(uint32_t op)
{
	static const char *const names[] = {"?",    "HELLO", "ATTACH", "START",   "END",   "SETTLE",
					    "QUIT", "CHECK", "FETCH",  "GATE",	  "MEMINFO", "EXPORT"};
	return op < sizeof(names) / sizeof(names[0]) ? names[op] : "an unknown command";
}

#endif
