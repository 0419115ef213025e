/* The shared memory through which tensors reach the runner. Two layouts:
 * - paged (host-resident backends): inputs in their own memfd, sealed against writes once the
 *   parent has mapped it (F_SEAL_FUTURE_WRITE), so the candidate's process can only map it
 *   read-only; every shape of the run has a region of its own, laid out before the runner starts
 *   (its page map, a sealed memfd, tells the runner which pages hold tensors), so that the runner
 *   maps and seals all of it at once and never maps again; every tensor ends exactly at a page
 *   boundary with a page after it that the runner leaves inaccessible, and keyed canary words fill
 *   the bytes in front of it. The parent writes it with streaming stores (kg_arena_put, poison,
 *   canaries): nothing it wrote stays in any cache, so no call starts warm;
 * - flat (device backends, which mirror it byte for byte): one memfd, every buffer 256-byte
 *   aligned and surrounded by 4 KiB canary bands.
 * The parent sees both memfds as one contiguous range: offsets below in_cap are the input file. */
#ifndef KG_ARENA_H
#define KG_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

#include "kg_common.h"
#include "verifier/plan/prng.h"
#include "verifier/plan/task.h"

#define KG_ARENA_GUARD 4096 /* flat: bytes of canary before and after every buffer */
#define KG_ARENA_ALIGN 256 /* flat: buffer start alignment (what cudaMalloc gives) */
#define KG_ARENA_PAGE 4096 /* paged: the protection unit, checked against the host's at create */
#define KG_ARENA_MAX_SLOTS (2 * KG_MAX_TENSORS) /* a task's inputs and outputs (verifier/plan/task.h) */
#define KG_ARENA_MAX_REGIONS 32 /* paged: one per shape of the run */

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
	int fd; /* flat: everything; paged: outputs */
	int fd_in; /* paged: the inputs' sealed memfd; -1 when flat */
	int paged;
	unsigned char *base;
	size_t capacity; /* bytes mapped at base (in_cap + the output file) */
	size_t in_cap; /* paged: size of the input file, where outputs' offsets start */
	size_t used; /* end of the last guard band of the current layout */
	/* paged: each region's start in the input and the output file (arena offsets) and its sizes;
	 * region is the one the current layout uses */
	int n_regions, region;
	uint64_t region_in[KG_ARENA_MAX_REGIONS], region_out[KG_ARENA_MAX_REGIONS];
	uint64_t region_in_size[KG_ARENA_MAX_REGIONS], region_out_size[KG_ARENA_MAX_REGIONS];
	/* paged: the tensor pages of every region laid out so far (kg_arena_map_region), then the
	 * sealed memfd that carries them to the runner (kg_arena_map_seal; -1 before) */
	size_t n_map, cap_map;
	struct kg_arena_range {
		uint64_t lo, hi;
	} *map;
	int fd_map;
	/* Every layout's tensor table (kg_arena_table_add after laying out each shape once), then the
	 * sealed memfd of all of them for the runner (kg_arena_tables_seal; -1 before): SETUP names
	 * the current layout's (table, set by kg_arena_layout to its `table` argument). */
	int n_tables, table;
	uint64_t *table_at; /* n_tables: each table's first tensor in tab (bytes) */
	uint32_t *table_n_in, *table_n_out;
	kg_buf tab; /* struct kg_wire_tensor entries of every table */
	int fd_tables;
	int n_in, n_out; /* slots: inputs first, then outputs */
	struct kg_arena_slot slot[KG_ARENA_MAX_SLOTS];
	kg_key canary_key, poison_key; /* kg_arena_set_keys; zero until then */
	uint64_t canary_id; /* the id of the current canary words */
	/* The current layout's dims ("N=64 D=128"), sent with SETUP: a runner that builds its
	 * reference per shape (a PyTorch Model, torch_runner.py) needs them; set by the caller. */
	char dims[512]; /* and a module's constants ("@1=f:3.14"), verifier/run.c */
};

/* Flat layout: bytes needed for buffers of the given sizes. */
size_t kg_arena_size_for(const uint64_t *bytes, int n);
/* Flat arena: one memfd, sealed against resizing so the runner cannot truncate it under us. */
int kg_arena_create(struct kg_arena *a, size_t capacity, kg_error *e);
/* Paged layout: the input file's and the output file's sizes for buffers of the given sizes
 * (inputs first). */
void kg_arena_paged_size_for(const uint64_t *bytes, int n_in, int n_out, size_t *in_bytes, size_t *out_bytes);
/* n_regions regions (one per shape), each with its input and output file sizes. */
int kg_arena_create_paged(struct kg_arena *a, int n_regions, const size_t *in_bytes, const size_t *out_bytes,
			  kg_error *e);
void kg_arena_destroy(struct kg_arena *a);
/* The secret keys of canary words and poison patterns (independent of the inputs' key). */
void kg_arena_set_keys(struct kg_arena *a, const kg_key *canary, const kg_key *poison);
/* Lays out n_in inputs and n_out outputs (dtype and shape each) in region (paged; 0 when flat)
 * and writes fresh canaries; table is the number of the layout's tensor table, which SETUP names
 * (kg_arena_table_add made it, for the same layout). */
int kg_arena_layout(struct kg_arena *a, int region, int table, int n_in, int n_out, const kg_dtype *dt,
		    const int *ndim, const int64_t (*shape)[KG_MAX_DIMS], kg_error *e);
/* Adds the current layout as the next tensor table (call after laying out each shape once, in the
 * order of their table numbers: -EINVAL for another), then writes them all into a sealed memfd (fd_tables) that the
 * runners get at start (runner/wire.h). */
int kg_arena_table_add(struct kg_arena *a, kg_error *e);
int kg_arena_tables_seal(struct kg_arena *a, kg_error *e);
/* Paged: adds the current layout's tensor pages to the page map (call after laying out each
 * region once), then writes the map into a sealed memfd (fd_map) for the runner. */
int kg_arena_map_region(struct kg_arena *a, kg_error *e);
int kg_arena_map_seal(struct kg_arena *a, kg_error *e);
/* Copies the input slot's bytes from src into the arena with streaming stores (paged) or plain
 * ones (flat, which a device runner copies on anyway). */
void kg_arena_put(struct kg_arena *a, int slot, const void *src);
static inline void *kg_arena_ptr(const struct kg_arena *a, int slot)
{
	return a->base + a->slot[slot].off;
}
/* Rewrites every guard band with the keystream of (canary key, id). */
void kg_arena_canary_fill(struct kg_arena *a, uint64_t id);
/* 0 when intact; otherwise 1 with the slot whose band was hit, whether before (-1) or after (+1)
 * it, and the byte distance from the buffer's edge (0 = the first byte outside). */
int kg_arena_canary_check(const struct kg_arena *a, int *slot, int *side, uint64_t *distance);
/* Fills every output with a NaN pattern keyed by (poison key, id) (random bytes for integers). */
void kg_arena_poison(struct kg_arena *a, uint64_t id);
/* The same patterns, not written: where kgate-device poisons the outputs on the device (its START's
 * fill ranges), the host arena's copy is overwritten by the call's outputs anyway. */
void kg_arena_poison_pick(struct kg_arena *a, uint64_t id);
/* Index of the first element of output slot that still holds its poison, and whose expected value
 * (exp, same dtype) is not that very pattern; -1 when all were written. */
int64_t kg_arena_unwritten(const struct kg_arena *a, int slot, const void *exp);

/* Where an arena offset lies in the current layout: KG_ARENA_AT_TENSOR (inside slot, pos bytes
 * from its start), KG_ARENA_AT_BAND (between buffers: slot is the nearer one, side -1 before it
 * or +1 after it, pos bytes from its edge), or KG_ARENA_AT_NONE (outside the layout). */
enum { KG_ARENA_AT_NONE = 0, KG_ARENA_AT_TENSOR, KG_ARENA_AT_BAND };
int kg_arena_where(const struct kg_arena *a, uint64_t off, int *slot, int *side, uint64_t *pos);

/* The outputs' span in the current layout: [*lo, *hi) from the first output's offset to the end of
 * the last (0, 0 when there are none). */
void kg_arena_out_span(const struct kg_arena *a, uint64_t *lo, uint64_t *hi);

#endif
