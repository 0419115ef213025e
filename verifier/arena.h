/* The shared memory arena through which tensors reach the runner: one sealed memfd holding every
 * input and output, each surrounded by canary guard bands. The parent owns it; the runner maps it. */
#ifndef KG_ARENA_H
#define KG_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

#include "kg_common.h"

#define KG_ARENA_GUARD 4096 /* bytes of canary before and after every buffer */
#define KG_ARENA_ALIGN 256 /* buffer start alignment (what cudaMalloc gives) */
#define KG_ARENA_MAX_SLOTS 16

struct kg_arena_slot {
	uint64_t off;
	uint64_t bytes;
	kg_dtype dtype;
	int ndim;
	int64_t shape[KG_MAX_DIMS];
	int64_t numel;
	uint64_t poison; /* the bit pattern of one poisoned element (low bytes used) */
};

struct kg_arena {
	int fd;
	unsigned char *base;
	size_t capacity;
	size_t used; /* end of the last guard band of the current layout */
	int n_in, n_out; /* slots: inputs first, then outputs */
	struct kg_arena_slot slot[KG_ARENA_MAX_SLOTS];
	uint64_t canary_key;
};

/* Bytes needed for buffers of the given sizes. */
size_t kg_arena_size_for(const uint64_t *bytes, int n);
/* Creates the memfd (sealed against resizing, so the runner cannot truncate it under us). */
int kg_arena_create(struct kg_arena *a, size_t capacity, kg_error *e);
void kg_arena_destroy(struct kg_arena *a);
/* Lays out n_in inputs and n_out outputs (dtype and shape each) and writes fresh canaries. */
int kg_arena_layout(struct kg_arena *a, int n_in, int n_out, const kg_dtype *dt, const int *ndim,
		    const int64_t (*shape)[KG_MAX_DIMS], kg_error *e);
static inline void *kg_arena_ptr(const struct kg_arena *a, int slot)
{
	return a->base + a->slot[slot].off;
}
/* Rewrites every guard band with the keyed pattern. */
void kg_arena_canary_fill(struct kg_arena *a, uint64_t key);
/* 0 when intact; otherwise 1 with the slot whose band was hit, whether before (-1) or after (+1)
 * it, and the byte distance from the buffer's edge (0 = the first byte outside). */
int kg_arena_canary_check(const struct kg_arena *a, int *slot, int *side, uint64_t *distance);
/* Fills every output with a per-run NaN pattern (a random payload; random bytes for integers). */
void kg_arena_poison(struct kg_arena *a, uint64_t seed);
/* Index of the first element of output slot that still holds its poison, and whose expected value
 * (exp, same dtype) is not that very pattern; -1 when all were written. */
int64_t kg_arena_unwritten(const struct kg_arena *a, int slot, const void *exp);

#endif
