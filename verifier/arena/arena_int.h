/* What the arena's two files share and nothing else needs: the cache eviction behind streaming
 * writes, and page rounding. */
#ifndef KG_ARENA_INT_H
#define KG_ARENA_INT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Every cached line of [p, p+n) written back and invalidated, in any core (a no-op where there are
 * no streaming stores). */
static inline void kg_arena_evict(const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
	if (!n)
		return;
	for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < (uintptr_t)p + n; a += 64)
		_mm_clflush((const void *)a);
#else
	(void)p, (void)n;
#endif
}

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

#endif
