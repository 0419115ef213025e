/* The arena's guard bands: keyed canary words written into every byte between (flat) or around
 * (paged: a tensor's first page's slack) the tensors before a call, and checked after it. Word k of
 * the arena is word k of the ChaCha20 keystream of (canary key, call id), so no band tells the
 * candidate anything of another call's or of the inputs' keys. */
#include <string.h>

#include "verifier/arena/arena.h"
#include "verifier/arena/arena_int.h"

void kg_arena_set_keys(struct kg_arena *a, const kg_key *canary, const kg_key *poison)
{
	a->canary_key = *canary;
	a->poison_key = *poison;
}

/* The canary words: word k of the arena (bytes 8k..8k+7) is word k of the keystream of
 * (canary key, id). Bands are walked in order, so one block serves eight words. */
struct words {
	kg_prng r;
	uint32_t blk_no;
	int have;
};

static uint64_t canary_word(struct words *w, uint64_t k)
{
	uint32_t blk = (uint32_t)(k >> 3);
	if (!w->have || blk != w->blk_no) {
		kg_chacha20_block(w->r.key, blk, w->r.nonce, w->r.buf);
		w->blk_no = blk;
		w->have = 1;
	}
	int i = (int)(k & 7) * 2;
	return (uint64_t)w->r.buf[i] | (uint64_t)w->r.buf[i + 1] << 32;
}

static void words_init(const struct kg_arena *a, struct words *w)
{
	kg_prng_init(&w->r, &a->canary_key, 0, a->canary_id);
	w->have = 0;
}

static unsigned char canary_byte(struct words *w, uint64_t off)
{
	return (unsigned char)(canary_word(w, off >> 3) >> ((off & 7) * 8));
}

static void fill_range(struct kg_arena *a, uint64_t lo, uint64_t hi)
{
	struct words w;
	words_init(a, &w);
	uint64_t o = lo;
	for (; o < hi && (o & 7); o++)
		a->base[o] = canary_byte(&w, o);
	for (; o + 8 <= hi; o += 8) {
		uint64_t v = canary_word(&w, o >> 3);
		memcpy(a->base + o, &v, 8);
	}
	for (; o < hi; o++)
		a->base[o] = canary_byte(&w, o);
}

static int check_range(const struct kg_arena *a, uint64_t lo, uint64_t hi, uint64_t *bad)
{
	struct words w;
	words_init(a, &w);
	for (uint64_t o = lo; o < hi; o++) {
		if (!(o & 7) && o + 8 <= hi) {
			uint64_t v = canary_word(&w, o >> 3), got;
			memcpy(&got, a->base + o, 8);
			if (v == got) {
				o += 7;
				continue;
			}
		}
		if (a->base[o] != canary_byte(&w, o)) {
			*bad = o;
			return 1;
		}
	}
	return 0;
}

/* Guard band i: before slot i (i < n), or after the last slot (i == n), cur the end of slot i-1.
 * Flat: everything between the tensors. Paged: only the slack inside a tensor's first page (its
 * end is page-aligned); every other byte of the layout sits on a page the runner never maps, where
 * the hardware faults any access, so writing and reading it back (up to the input region's whole
 * capacity at a small variant shape: a gigabyte a call at softmax's nominal size) guards nothing. */
static void band(const struct kg_arena *a, int i, uint64_t cur, uint64_t *lo, uint64_t *hi)
{
	int n = a->n_in + a->n_out;
	if (!a->paged) {
		*lo = cur;
		*hi = i < n ? a->slot[i].off : a->used;
	} else if (i < n) {
		*hi = a->slot[i].off;
		*lo = *hi / KG_ARENA_PAGE * KG_ARENA_PAGE;
	} else {
		*lo = cur;
		*hi = align_up(cur, KG_ARENA_PAGE);
	}
}

void kg_arena_canary_fill(struct kg_arena *a, uint64_t id)
{
	a->canary_id = id;
	uint64_t cur = a->paged ? a->region_in[a->region] : 0, lo, hi;
	int n = a->n_in + a->n_out;
	for (int i = 0; i <= n; i++) {
		band(a, i, cur, &lo, &hi);
		fill_range(a, lo, hi);
		if (a->paged) /* a band's lines share pages with tensors: none stays cached */
			kg_arena_evict(a->base + lo, (size_t)(hi - lo));
		if (i < n)
			cur = a->slot[i].off + a->slot[i].bytes;
	}
}

int kg_arena_canary_check(const struct kg_arena *a, int *slot, int *side, uint64_t *distance)
{
	uint64_t cur = a->paged ? a->region_in[a->region] : 0, bad, lo, end;
	int n = a->n_in + a->n_out;
	for (int i = 0; i <= n; i++) {
		band(a, i, cur, &lo, &end);
		if (check_range(a, lo, end, &bad)) {
			/* Attribute the hit to the nearer buffer edge. */
			uint64_t after_prev = i > 0 ? bad - cur : UINT64_MAX;
			uint64_t before_next = i < n ? end - 1 - bad : UINT64_MAX;
			if (after_prev <= before_next) {
				*slot = i - 1;
				*side = 1;
				*distance = after_prev;
			} else {
				*slot = i;
				*side = -1;
				*distance = before_next;
			}
			return 1;
		}
		if (i < n)
			cur = a->slot[i].off + a->slot[i].bytes;
	}
	return 0;
}

