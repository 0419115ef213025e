/* START's staging plan (wire.h's ranges), checked and walked the same way by kgate-device and by
 * the tests that have no GPU: the host arena's bytes between the ranges, then each range. */
#ifndef KG_DEVICE_STAGE_H
#define KG_DEVICE_STAGE_H

#include <stdint.h>

#include "device/wire.h"

/* What a SLOT range may read of its source: the source's staged bytes, less the part its last
 * END's snapshot overwrote. */
struct kg_stage_src {
	int usable; /* an attached slot other than the one being staged */
	uint64_t staged, snap_lo, snap_hi;
};

/* 1 when c's ranges are sorted, disjoint, non-empty, inside [0, c->bytes), FILLs of whole elements
 * of 1, 2, 4 or 8 bytes on aligned offsets, GENs of a valid draw (kg_gen_valid) of exactly their
 * bytes on an element-aligned offset, SLOTs inside what src may give; else 0. */
int kg_stage_valid(const struct kg_dev_cmd *c, const struct kg_stage_src *src);

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
