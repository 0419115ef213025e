/* Arena layout, canaries and poison. Guard bands are everything between buffers, so an overrun
 * of a single byte in either direction lands in a band. */
#include "verifier/arena.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verifier/dtype.h"
#include "verifier/prng.h"

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

size_t kg_arena_size_for(const uint64_t *bytes, int n)
{
	uint64_t cur = 0;
	for (int i = 0; i < n; i++)
		cur = align_up(cur + KG_ARENA_GUARD, KG_ARENA_ALIGN) + bytes[i];
	return (size_t)align_up(cur + KG_ARENA_GUARD, 4096);
}

int kg_arena_create(struct kg_arena *a, size_t capacity, kg_error *e)
{
	memset(a, 0, sizeof(*a));
	a->fd = -1;
	a->base = MAP_FAILED;
	capacity = (size_t)align_up(capacity, 4096);
	int fd = memfd_create("kgate-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return kg_err(e, -errno, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)capacity)) {
		int rc = kg_err(e, -errno, "arena of %zu bytes: %s", capacity, strerror(errno));
		close(fd);
		return rc;
	}
	/* A runner that shrank the file would make our next access SIGBUS: seal the size. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int rc = kg_err(e, -errno, "sealing the arena: %s", strerror(errno));
		close(fd);
		return rc;
	}
	void *p = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int rc = kg_err(e, -errno, "mapping the arena: %s", strerror(errno));
		close(fd);
		return rc;
	}
	a->fd = fd;
	a->base = p;
	a->capacity = capacity;
	return 0;
}

void kg_arena_destroy(struct kg_arena *a)
{
	if (a->base && a->base != MAP_FAILED)
		munmap(a->base, a->capacity);
	if (a->fd >= 0)
		close(a->fd);
	a->base = MAP_FAILED;
	a->fd = -1;
}

static unsigned char canary_byte(uint64_t key, uint64_t off)
{
	uint64_t w = kg_seed_derive(key, off >> 3);
	return (unsigned char)(w >> ((off & 7) * 8));
}

static void fill_range(struct kg_arena *a, uint64_t lo, uint64_t hi)
{
	/* Word at a time where aligned; the keyed words make each band's content unique. */
	uint64_t o = lo;
	for (; o < hi && (o & 7); o++)
		a->base[o] = canary_byte(a->canary_key, o);
	for (; o + 8 <= hi; o += 8) {
		uint64_t w = kg_seed_derive(a->canary_key, o >> 3);
		memcpy(a->base + o, &w, 8);
	}
	for (; o < hi; o++)
		a->base[o] = canary_byte(a->canary_key, o);
}

static int check_range(const struct kg_arena *a, uint64_t lo, uint64_t hi, uint64_t *bad)
{
	for (uint64_t o = lo; o < hi; o++) {
		if (!(o & 7) && o + 8 <= hi) {
			uint64_t w = kg_seed_derive(a->canary_key, o >> 3), got;
			memcpy(&got, a->base + o, 8);
			if (w == got) {
				o += 7;
				continue;
			}
		}
		if (a->base[o] != canary_byte(a->canary_key, o)) {
			*bad = o;
			return 1;
		}
	}
	return 0;
}

void kg_arena_canary_fill(struct kg_arena *a, uint64_t key)
{
	a->canary_key = key;
	uint64_t cur = 0;
	int n = a->n_in + a->n_out;
	for (int i = 0; i < n; i++) {
		fill_range(a, cur, a->slot[i].off);
		cur = a->slot[i].off + a->slot[i].bytes;
	}
	fill_range(a, cur, a->used);
}

int kg_arena_canary_check(const struct kg_arena *a, int *slot, int *side, uint64_t *distance)
{
	uint64_t cur = 0, bad;
	int n = a->n_in + a->n_out;
	for (int i = 0; i <= n; i++) {
		uint64_t end = i < n ? a->slot[i].off : a->used;
		if (check_range(a, cur, end, &bad)) {
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

int kg_arena_layout(struct kg_arena *a, int n_in, int n_out, const kg_dtype *dt, const int *ndim,
		    const int64_t (*shape)[KG_MAX_DIMS], kg_error *e)
{
	int n = n_in + n_out;
	if (n > KG_ARENA_MAX_SLOTS)
		return kg_err(e, -E2BIG, "more than %d tensors", KG_ARENA_MAX_SLOTS);
	uint64_t cur = 0;
	for (int i = 0; i < n; i++) {
		struct kg_arena_slot *s = &a->slot[i];
		memset(s, 0, sizeof(*s));
		s->dtype = dt[i];
		s->ndim = ndim[i];
		memcpy(s->shape, shape[i], sizeof(s->shape));
		s->numel = 1;
		for (int d = 0; d < ndim[i]; d++)
			s->numel *= shape[i][d];
		s->bytes = (uint64_t)s->numel * kg_dtype_size(dt[i]);
		s->off = align_up(cur + KG_ARENA_GUARD, KG_ARENA_ALIGN);
		cur = s->off + s->bytes;
	}
	uint64_t used = align_up(cur + KG_ARENA_GUARD, 4096);
	if (used > a->capacity)
		return kg_err(e, -ENOSPC, "layout needs %llu bytes, the arena has %zu", (unsigned long long)used,
			      a->capacity);
	a->n_in = n_in;
	a->n_out = n_out;
	a->used = (size_t)used;
	kg_arena_canary_fill(a, a->canary_key);
	return 0;
}

static uint64_t poison_pattern(kg_dtype dt, uint64_t r)
{
	switch (dt) {
	case KG_F32: /* quiet NaN, random sign and payload, never the default NaN 0x7fc00000 */
		return (r & 0x80000000u) | 0x7fc00000u | ((r >> 8) & 0x3ffffeu) | 1u;
	case KG_F16:
		return (r & 0x8000u) | 0x7e00u | ((r >> 20) & 0x1feu) | 1u;
	case KG_BF16:
		return (r & 0x8000u) | 0x7fc0u | ((r >> 20) & 0x3eu) | 1u;
	default:
		return r;
	}
}

void kg_arena_poison(struct kg_arena *a, uint64_t seed)
{
	for (int i = a->n_in; i < a->n_in + a->n_out; i++) {
		struct kg_arena_slot *s = &a->slot[i];
		size_t es = kg_dtype_size(s->dtype);
		s->poison = poison_pattern(s->dtype, kg_seed_derive(seed, (uint64_t)i));
		unsigned char pat[8];
		memcpy(pat, &s->poison, 8); /* little-endian: the element's bytes are the low bytes */
		unsigned char *p = a->base + s->off;
		if (es == 1) {
			memset(p, pat[0], s->bytes);
			continue;
		}
		/* Doubling copy: write one element, then copy what is written onto what is not. */
		memcpy(p, pat, es);
		for (uint64_t done = es; done < s->bytes;) {
			uint64_t n = done < s->bytes - done ? done : s->bytes - done;
			memcpy(p + done, p, n);
			done += n;
		}
	}
}

int64_t kg_arena_unwritten(const struct kg_arena *a, int slot, const void *exp)
{
	const struct kg_arena_slot *s = &a->slot[slot];
	size_t es = kg_dtype_size(s->dtype);
	const unsigned char *p = a->base + s->off, *x = exp;
	for (int64_t i = 0; i < s->numel; i++) {
		if (!memcmp(p + (size_t)i * es, &s->poison, es) && (!x || memcmp(x + (size_t)i * es, &s->poison, es)))
			return i;
	}
	return -1;
}
