/* A tiny parallel-for over index ranges for the parent's bulk passes (generation, comparison,
 * reductions over gigabyte tensors). Deterministic: results never depend on the thread count. */
#ifndef KG_PARALLEL_H
#define KG_PARALLEL_H

#include <stddef.h>

/* Calls fn(arg, part, lo, hi) for parts of [0, n), each of at least min_chunk elements, on up
 * to 16 threads; part indexes a caller-provided per-part result slot (< KG_PAR_MAX_PARTS).
 * Returns the number of parts used. */
#define KG_PAR_MAX_PARTS 16
int kg_parallel_for(size_t n, size_t min_chunk, void (*fn)(void *arg, int part, size_t lo, size_t hi), void *arg);

/* memcpy on every core: a gigabyte output copied once per call (the reference's, the snapshot
 * the async check keeps) took a fifth of a second on one. */
void kg_parallel_copy(void *dst, const void *src, size_t n);

#endif
