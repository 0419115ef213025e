/* START's staging plan (wire.h's ranges), checked and walked the same way by kgate-device and by
 * the tests that have no GPU: the host arena's bytes between the ranges, then each range. */
#ifndef KG_DEVICE_STAGE_H
#define KG_DEVICE_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "device/wire.h"

/* What a SLOT range may read of its source: the source's staged bytes, less the part its last
 * END's snapshot overwrote. */
struct kg_stage_src {
	int usable; /* an attached slot other than the one being staged */
	uint64_t staged, snap_lo, snap_hi;
};

/* What kgate-device keeps of a slot's last START and END: what its private buffer holds. */
struct kg_stage_book {
	uint64_t staged; /* [0, staged) staged by the last START (every set's, a batch's) */
	uint64_t snap_lo, snap_hi; /* overwritten by its outputs' snapshot (set 0's offsets) */
	uint64_t stride; /* the last START's sets, stride bytes apart (1 set: an ordinary call) */
	uint32_t sets, snap_sets; /* snap_sets: the sets the snapshot holds (0: none yet) */
};

/* What a START of `sets` sets, stride apart, may read by SLOT ranges of another attached slot
 * whose book is f: a lone call, what f's last START staged less its snapshot; a batch, the same
 * where f's last START was a batch of as many sets or more at the same stride, snapshotted in
 * every set (each set reads its own set of f); else nothing (usable 0). */
struct kg_stage_src kg_stage_src_of(const struct kg_stage_book *f, uint32_t sets, uint64_t stride);

/* 1 when c's ranges are sorted, disjoint, non-empty, inside [0, c->bytes), FILLs of whole elements
 * of 1, 2, 4 or 8 bytes on aligned offsets, GENs of a valid draw (kg_gen_valid) of exactly their
 * bytes on an element-aligned offset, SLOTs inside what src may give; else 0, and (why not NULL)
 * which range broke which rule, in words. */
int kg_stage_valid(const struct kg_dev_cmd *c, const struct kg_stage_src *src, char *why, size_t whysz);

/* Calls host(off, n) for each run of bytes from the host arena and range(g) for each range, in
 * offset order; stops at the first non-zero return and returns it. */
int kg_stage_walk(const struct kg_dev_cmd *c, int (*host)(void *arg, uint64_t off, uint64_t n),
		  int (*range)(void *arg, const struct kg_dev_range *g), void *arg);

/* A gated START's own fields (wire.h): a gate page attached to the slot (has_gate), at most
 * KG_DEV_MAX_GATED_SETS sets, the outputs inside the call's bytes (each set's snapshot is queued at
 * START), and a probe only of a lone call, inside the call's bytes and clear of the outputs, on
 * 8-byte words, within KG_DEV_PROBE_MAX together. 1 valid, 0 not. */
int kg_stage_gate_valid(const struct kg_dev_cmd *c, int has_gate, uint32_t sets);

/* A gated call whose last snapshot did not come within its grace: which of the runner's marks
 * never came (wire.h's enum kg_dev_gate_state) from the page's ARMED and DONE words, for the call
 * of `sets` sets from token tok (the words compare cyclically); *set the set whose DONE never came
 * (NO_DONE), else 0. */
uint32_t kg_stage_gate_verdict(uint32_t armed, uint32_t done, uint32_t tok, uint32_t sets, uint32_t *set);

#endif
