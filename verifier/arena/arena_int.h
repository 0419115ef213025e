/* What the arena's two files share and nothing else needs: the cache eviction behind streaming
 * writes, and page rounding. */
#ifndef KG_ARENA_INT_H
#define KG_ARENA_INT_H

#include <stddef.h>
#include <stdint.h>

/* Every cached line of [p, p+n) written back and invalidated, in any core (arena.c). */
void kg_arena_evict(const unsigned char *p, size_t n);

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

#endif
