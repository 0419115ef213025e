/* Arena layouts (flat and paged), streaming writes and poison. Guard bands are everything between
 * buffers, so an overrun of a single byte in either direction lands in a band (paged: in an
 * unmapped page of the candidate's process); their words (bands.c) and the poison are keyed
 * ChaCha20 output. */
#include "verifier/arena/arena.h"
#include "verifier/arena/arena_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verifier/plan/dtype.h"
#include "verifier/plan/parallel.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux >= 5.1 */
#endif

#include "runner/wire.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_STREAMING 1
#endif

/* Streaming (non-temporal) stores: the data goes to memory and every cached copy of its lines, in
 * any core, is invalidated, so a runner's next call reads it cold, as if the caches had been
 * flushed. The bytes before the first and after the last 16-byte boundary are written plainly and
 * their lines flushed (kg_arena_evict, arena_int.h). Elsewhere a plain copy (and warm caches: say
 * so where timing matters).
 * dst[0..n) from src, or (src NULL) from the 16-byte pattern pat whose phase is dst's 16-byte
 * alignment (pat holds whole elements, and dst starts on one). */
static void stream_write(unsigned char *dst, const unsigned char *src, const unsigned char *pat, size_t n)
{
#ifdef HAVE_STREAMING
	size_t head = (size_t)(-(uintptr_t)dst & 15);
	if (head > n)
		head = n;
	for (size_t i = 0; i < head; i++)
		dst[i] = src ? src[i] : pat[((uintptr_t)dst + i) & 15];
	size_t i = head;
	__m128i v = src ? _mm_setzero_si128() : _mm_loadu_si128((const __m128i *)pat);
	for (; i + 16 <= n; i += 16) {
		if (src)
			v = _mm_loadu_si128((const __m128i *)(src + i));
		_mm_stream_si128((__m128i *)(dst + i), v);
	}
	size_t tail = i;
	for (; i < n; i++)
		dst[i] = src ? src[i] : pat[((uintptr_t)dst + i) & 15];
	_mm_sfence();
	kg_arena_evict(dst, head);
	kg_arena_evict(dst + tail, n - tail);
#else
	if (src)
		memcpy(dst, src, n);
	else
		for (size_t i = 0; i < n; i++)
			dst[i] = pat[((uintptr_t)dst + i) & 15];
#endif
}

struct stream_job {
	unsigned char *dst;
	const unsigned char *src, *pat;
	size_t es;
};

static void stream_part(void *arg, int part, size_t lo, size_t hi)
{
	(void)part;
	const struct stream_job *j = arg;
	stream_write(j->dst + lo * j->es, j->src ? j->src + lo * j->es : NULL, j->pat, (hi - lo) * j->es);
}

/* Over elements of es bytes, on every core for large tensors. */
static void stream_elements(unsigned char *dst, const void *src, const unsigned char *pat, size_t numel, size_t es)
{
	struct stream_job j = {.dst = dst, .src = src, .pat = pat, .es = es};
	kg_parallel_for(numel, (1u << 20) / (es ? es : 1), stream_part, &j);
}


size_t kg_arena_size_for(const uint64_t *bytes, int n)
{
	uint64_t cur = 0;
	for (int i = 0; i < n; i++)
		cur = align_up(cur + KG_ARENA_GUARD, KG_ARENA_ALIGN) + bytes[i];
	return (size_t)align_up(cur + KG_ARENA_GUARD, 4096);
}

void kg_arena_paged_size_for(const uint64_t *bytes, int n_in, int n_out, size_t *in_bytes, size_t *out_bytes)
{
	/* inputs: [guard][tensor]...[guard]; outputs: [tensor][guard]... (the input file's last guard
	 * page is the first output's front guard) */
	uint64_t cur = KG_ARENA_PAGE;
	for (int i = 0; i < n_in; i++)
		cur += align_up(bytes[i] ? bytes[i] : 1, KG_ARENA_PAGE) + KG_ARENA_PAGE;
	*in_bytes = (size_t)cur;
	cur = 0;
	for (int i = n_in; i < n_in + n_out; i++)
		cur += align_up(bytes[i] ? bytes[i] : 1, KG_ARENA_PAGE) + KG_ARENA_PAGE;
	*out_bytes = (size_t)(cur ? cur : KG_ARENA_PAGE);
}

static void arena_init(struct kg_arena *a)
{
	memset(a, 0, sizeof(*a));
	a->fd = a->fd_in = a->fd_map = a->fd_tables = -1;
	a->base = MAP_FAILED;
}

static int memfd_sized(const char *name, size_t bytes, kg_error *e)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return kg_err(e, -errno, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)bytes)) {
		int rc = kg_err(e, -errno, "arena of %zu bytes: %s", bytes, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

static int seal(int fd, int seals, const char *what, kg_error *e)
{
	if (fcntl(fd, F_ADD_SEALS, seals))
		return kg_err(e, -errno, "sealing the %s: %s", what, strerror(errno));
	return 0;
}

int kg_arena_create(struct kg_arena *a, size_t capacity, kg_error *e)
{
	arena_init(a);
	capacity = (size_t)align_up(capacity, 4096);
	int rc, fd = memfd_sized("kgate-arena", capacity, e);
	if (fd < 0)
		return fd;
	/* A runner that shrank the file would make our next access SIGBUS: seal the size. */
	if ((rc = seal(fd, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, "arena", e))) {
		close(fd);
		return rc;
	}
	void *p = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = kg_err(e, -errno, "mapping the arena: %s", strerror(errno));
		close(fd);
		return rc;
	}
	a->fd = fd;
	a->base = p;
	a->capacity = capacity;
	return 0;
}

int kg_arena_create_paged(struct kg_arena *a, int n_regions, const size_t *in_sizes, const size_t *out_sizes,
			  kg_error *e)
{
	int rc;
	arena_init(a);
	if (sysconf(_SC_PAGESIZE) != KG_ARENA_PAGE)
		return kg_err(e, -ENOTSUP, "paged arena: the host's page is %ld bytes, kgate lays out %d",
			      sysconf(_SC_PAGESIZE), KG_ARENA_PAGE);
	if (n_regions < 1 || n_regions > KG_ARENA_MAX_REGIONS)
		return kg_err(e, -E2BIG, "paged arena: %d regions (1 to %d)", n_regions, KG_ARENA_MAX_REGIONS);
	uint64_t in_bytes = 0, out_bytes = 0;
	for (int r = 0; r < n_regions; r++) {
		a->region_in[r] = in_bytes;
		a->region_out[r] = out_bytes;
		a->region_in_size[r] = align_up(in_sizes[r], KG_ARENA_PAGE);
		a->region_out_size[r] = align_up(out_sizes[r], KG_ARENA_PAGE);
		in_bytes += a->region_in_size[r];
		out_bytes += a->region_out_size[r];
	}
	for (int r = 0; r < n_regions; r++)
		a->region_out[r] += in_bytes; /* arena offsets: the outputs' file follows the inputs' */
	a->n_regions = n_regions;
	a->paged = 1;
	a->in_cap = in_bytes;
	a->capacity = in_bytes + out_bytes;
	if ((a->fd_in = memfd_sized("kgate-inputs", in_bytes, e)) < 0 ||
	    (a->fd = memfd_sized("kgate-outputs", out_bytes, e)) < 0) {
		rc = a->fd_in < 0 ? a->fd_in : a->fd;
		goto fail;
	}
	/* One range, both files: slot offsets work the same in either layout. */
	void *p = mmap(NULL, a->capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		rc = kg_err(e, -errno, "reserving the arena: %s", strerror(errno));
		goto fail;
	}
	a->base = p;
	if (mmap(a->base, in_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd_in, 0) == MAP_FAILED ||
	    mmap(a->base + in_bytes, out_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd, 0) ==
		    MAP_FAILED) {
		rc = kg_err(e, -errno, "mapping the arena: %s", strerror(errno));
		goto fail;
	}
	/* Our writable mapping of the inputs exists now; from here on no process can write the file
	 * or map it writable (the runner's mprotect to PROT_WRITE fails: the mapping may not write),
	 * nor punch holes in it. Only our mapping refreshes the inputs. */
	if ((rc = seal(a->fd_in, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL, "inputs", e)) ||
	    (rc = seal(a->fd, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, "outputs", e)))
		goto fail;
	return 0;
fail:
	kg_arena_destroy(a);
	return rc;
}

void kg_arena_destroy(struct kg_arena *a)
{
	if (a->base && a->base != MAP_FAILED)
		munmap(a->base, a->capacity);
	if (a->fd >= 0)
		close(a->fd);
	if (a->fd_in >= 0)
		close(a->fd_in);
	if (a->fd_map >= 0)
		close(a->fd_map);
	if (a->fd_tables >= 0)
		close(a->fd_tables);
	free(a->map);
	free(a->table_at);
	free(a->table_n_in);
	free(a->table_n_out);
	kg_buf_free(&a->tab);
	a->map = NULL;
	a->table_at = NULL;
	a->table_n_in = a->table_n_out = NULL;
	a->n_map = a->cap_map = 0;
	a->n_tables = 0;
	a->base = MAP_FAILED;
	a->fd = a->fd_in = a->fd_map = a->fd_tables = -1;
}

int kg_arena_map_region(struct kg_arena *a, kg_error *e)
{
	size_t n = a->paged ? (size_t)(a->n_in + a->n_out) : 0;
	if (a->n_map + n > a->cap_map) {
		size_t cap = a->cap_map ? a->cap_map : 64;
		while (cap < a->n_map + n)
			cap *= 2;
		struct kg_arena_range *m = realloc(a->map, cap * sizeof(*m));
		if (!m)
			return kg_err(e, -ENOMEM, "out of memory for the page map (%zu ranges)", cap);
		a->map = m;
		a->cap_map = cap;
	}
	for (size_t i = 0; i < n; i++) {
		const struct kg_arena_slot *sl = &a->slot[i];
		a->map[a->n_map].lo = sl->off / KG_ARENA_PAGE * KG_ARENA_PAGE;
		a->map[a->n_map].hi = align_up(sl->off + (sl->bytes ? sl->bytes : 1), KG_ARENA_PAGE);
		a->n_map++;
	}
	return 0;
}

/* A sealed memfd holding bytes from data (what a runner reads at start and can never change). */
static int sealed_file(const char *name, const void *data, size_t bytes, kg_error *e)
{
	int fd = memfd_sized(name, bytes, e);
	if (fd < 0)
		return fd;
	size_t at = 0;
	while (at < bytes) {
		ssize_t n = pwrite(fd, (const char *)data + at, bytes - at, (off_t)at);
		if (n <= 0)
			break;
		at += (size_t)n;
	}
	int rc = at == bytes ? seal(fd, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL, name, e)
			     : kg_err(e, -EIO, "writing the %s", name);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int kg_arena_table_add(struct kg_arena *a, kg_error *e)
{
	if (a->table != a->n_tables)
		return kg_err(e, -EINVAL, "tensor table %d added as table %d (in the order of their numbers)", a->table,
			      a->n_tables);
	int n = a->n_tables + 1;
	uint64_t *at = realloc(a->table_at, (size_t)n * sizeof(*at));
	if (at)
		a->table_at = at;
	uint32_t *ni = at ? realloc(a->table_n_in, (size_t)n * sizeof(*ni)) : NULL;
	if (ni)
		a->table_n_in = ni;
	uint32_t *no = ni ? realloc(a->table_n_out, (size_t)n * sizeof(*no)) : NULL;
	if (!no)
		return kg_err(e, -ENOMEM, "out of memory for the tensor tables");
	a->table_n_out = no;
	a->table_at[a->n_tables] = a->tab.len;
	a->table_n_in[a->n_tables] = (uint32_t)a->n_in;
	a->table_n_out[a->n_tables] = (uint32_t)a->n_out;
	for (int i = 0; i < a->n_in + a->n_out; i++) {
		const struct kg_arena_slot *sl = &a->slot[i];
		struct kg_wire_tensor w = {.offset = sl->off, .dtype = sl->dtype, .ndim = sl->ndim};
		memcpy(w.shape, sl->shape, sizeof(w.shape));
		if (kg_buf_append(&a->tab, &w, sizeof(w)))
			return kg_err(e, -ENOMEM, "out of memory for the tensor tables");
	}
	a->n_tables = n;
	return 0;
}

int kg_arena_tables_seal(struct kg_arena *a, kg_error *e)
{
	struct kg_wire_tables h = {.magic = KG_WIRE_MAGIC, .count = (uint32_t)a->n_tables};
	size_t heads = sizeof(h) + (size_t)a->n_tables * sizeof(struct kg_wire_table);
	size_t start = (heads + 7) / 8 * 8, bytes = start + a->tab.len;
	unsigned char *f = calloc(1, bytes);
	if (!f)
		return kg_err(e, -ENOMEM, "out of memory for the tensor tables (%zu bytes)", bytes);
	memcpy(f, &h, sizeof(h));
	for (int i = 0; i < a->n_tables; i++) {
		struct kg_wire_table t = {.at = start + a->table_at[i], .n_in = a->table_n_in[i], .n_out = a->table_n_out[i]};
		memcpy(f + sizeof(h) + (size_t)i * sizeof(t), &t, sizeof(t));
	}
	if (a->tab.len)
		memcpy(f + start, a->tab.data, a->tab.len);
	int fd = sealed_file("kgate-tables", f, bytes, e);
	free(f);
	if (fd < 0)
		return fd;
	if (a->fd_tables >= 0)
		close(a->fd_tables);
	a->fd_tables = fd;
	return 0;
}

int kg_arena_map_seal(struct kg_arena *a, kg_error *e)
{
	if (!a->paged)
		return 0;
	size_t bytes = sizeof(struct kg_wire_pagemap) + (size_t)a->n_map * sizeof(struct kg_wire_range);
	unsigned char *f = malloc(bytes);
	if (!f)
		return kg_err(e, -ENOMEM, "out of memory for the page map (%zu bytes)", bytes);
	struct kg_wire_pagemap h = {.magic = KG_WIRE_MAGIC, .count = (uint32_t)a->n_map};
	memcpy(f, &h, sizeof(h));
	for (size_t i = 0; i < a->n_map; i++) {
		struct kg_wire_range r = {.lo = a->map[i].lo, .hi = a->map[i].hi};
		memcpy(f + sizeof(h) + i * sizeof(r), &r, sizeof(r));
	}
	int fd = sealed_file("kgate-pagemap", f, bytes, e);
	free(f);
	if (fd < 0)
		return fd;
	if (a->fd_map >= 0)
		close(a->fd_map);
	a->fd_map = fd;
	return 0;
}

void kg_arena_put(struct kg_arena *a, int slot, const void *src)
{
	const struct kg_arena_slot *sl = &a->slot[slot];
	if (!a->paged) {
		memcpy(a->base + sl->off, src, sl->bytes);
		return;
	}
	size_t es = kg_dtype_size(sl->dtype);
	stream_elements(a->base + sl->off, src, NULL, (size_t)sl->numel, es ? es : 1);
}

int kg_arena_layout(struct kg_arena *a, int region, int table, int n_in, int n_out, const kg_dtype *dt,
		    const int *ndim, const int64_t (*shape)[KG_MAX_DIMS], kg_error *e)
{
	int n = n_in + n_out;
	if (n > KG_ARENA_MAX_SLOTS)
		return kg_err(e, -E2BIG, "more than %d tensors", KG_ARENA_MAX_SLOTS);
	if (region < 0 || (a->paged ? region >= a->n_regions : region != 0))
		return kg_err(e, -EINVAL, "arena region %d does not exist", region);
	/* paged: region r's inputs [guard][tensor][guard]..., its outputs [tensor][guard]...; the
	 * page in front of its first output is the last guard of the region before it in the
	 * outputs' file, or of the inputs' file */
	uint64_t in_end = a->paged ? a->region_in[region] + a->region_in_size[region] : 0;
	uint64_t cur = a->paged ? a->region_in[region] + KG_ARENA_PAGE : 0;
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
		if (!a->paged) {
			s->off = align_up(cur + KG_ARENA_GUARD, KG_ARENA_ALIGN);
			cur = s->off + s->bytes;
			continue;
		}
		/* the tensor's last byte is its last page's: an overrun of one byte is in the guard page;
		 * its start is then aligned to its size's alignment (its element size at least) */
		if (i == n_in)
			cur = a->region_out[region];
		uint64_t end = cur + align_up(s->bytes ? s->bytes : 1, KG_ARENA_PAGE);
		s->off = end - s->bytes;
		cur = end + KG_ARENA_PAGE;
		if (i < n_in && cur > in_end)
			return kg_err(e, -ENOSPC, "inputs need more than the region's %llu bytes",
				      (unsigned long long)a->region_in_size[region]);
	}
	uint64_t used = a->paged ? (n_out ? cur : in_end) : align_up(cur + KG_ARENA_GUARD, 4096);
	uint64_t limit = a->paged && n_out ? a->region_out[region] + a->region_out_size[region] : a->capacity;
	if (used > limit)
		return kg_err(e, -ENOSPC, "layout needs %llu bytes, the arena has %llu", (unsigned long long)used,
			      (unsigned long long)limit);
	a->region = region;
	a->table = table;
	a->n_in = n_in;
	a->n_out = n_out;
	a->used = (size_t)used;
	kg_arena_canary_fill(a, a->canary_id);
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
	case KG_BOOL: /* never a bool's 0 or 1: no written element looks unwritten */
		return 2 + (r & 0xffu) % 254;
	default:
		return r;
	}
}

void kg_arena_poison_pick(struct kg_arena *a, uint64_t id)
{
	for (int i = a->n_in; i < a->n_in + a->n_out; i++)
		a->slot[i].poison = poison_pattern(a->slot[i].dtype, kg_key_u64(&a->poison_key, (uint32_t)i, id));
}

void kg_arena_poison(struct kg_arena *a, uint64_t id)
{
	kg_arena_poison_pick(a, id);
	for (int i = a->n_in; i < a->n_in + a->n_out; i++) {
		struct kg_arena_slot *s = &a->slot[i];
		size_t es = kg_dtype_size(s->dtype);
		unsigned char pat[8];
		memcpy(pat, &s->poison, 8); /* little-endian: the element's bytes are the low bytes */
		unsigned char *p = a->base + s->off;
		if (a->paged) {
			unsigned char pat16[16];
			for (size_t k = 0; k < 16; k++)
				pat16[k] = pat[k % es];
			stream_elements(p, NULL, pat16, (size_t)s->numel, es);
			continue;
		}
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

/* The first element of [lo, hi) that holds the poison where exp (if any) does not; words of
 * the element's size, so the fp32 case is a plain compare of 32-bit words. */
#define UNWRITTEN_RANGE(T)                                                                         \
	static int64_t unwritten_##T(const void *pv, const void *xv, uint64_t poison, size_t lo, size_t hi) \
	{                                                                                          \
		const T *p = pv, *x = xv, w = (T)poison;                                           \
		for (size_t i = lo; i < hi; i++)                                                   \
			if (p[i] == w && (!x || x[i] != w))                                        \
				return (int64_t)i;                                                 \
		return -1;                                                                         \
	}
UNWRITTEN_RANGE(uint8_t)
UNWRITTEN_RANGE(uint16_t)
UNWRITTEN_RANGE(uint32_t)
UNWRITTEN_RANGE(uint64_t)

struct unwritten_job {
	const void *p, *x;
	uint64_t poison;
	size_t es;
	int64_t first[KG_PAR_MAX_PARTS];
};

static void unwritten_part(void *arg, int part, size_t lo, size_t hi)
{
	struct unwritten_job *j = arg;
	j->first[part] = j->es == 4   ? unwritten_uint32_t(j->p, j->x, j->poison, lo, hi)
			 : j->es == 2 ? unwritten_uint16_t(j->p, j->x, j->poison, lo, hi)
			 : j->es == 8 ? unwritten_uint64_t(j->p, j->x, j->poison, lo, hi)
				      : unwritten_uint8_t(j->p, j->x, j->poison, lo, hi);
}

int64_t kg_arena_unwritten(const struct kg_arena *a, int slot, const void *exp)
{
	const struct kg_arena_slot *s = &a->slot[slot];
	/* bit patterns compared as words: a float poison that is a NaN still compares equal */
	struct unwritten_job j = {.p = a->base + s->off, .x = exp, .poison = s->poison, .es = kg_dtype_size(s->dtype)};
	int parts = kg_parallel_for((size_t)s->numel, 1u << 20, unwritten_part, &j);
	for (int i = 0; i < parts; i++) /* in index order: the first of the first part that has one */
		if (j.first[i] >= 0)
			return j.first[i];
	return -1;
}

int kg_arena_where(const struct kg_arena *a, uint64_t off, int *slot, int *side, uint64_t *pos)
{
	int n = a->n_in + a->n_out;
	uint64_t prev_end = 0;
	if (off >= a->used)
		return KG_ARENA_AT_NONE;
	for (int i = 0; i <= n; i++) {
		uint64_t start = i < n ? a->slot[i].off : a->used;
		if (off < start) {
			/* in the band before slot i: name the nearer edge */
			uint64_t after_prev = i > 0 ? off - prev_end : UINT64_MAX;
			uint64_t before_next = i < n ? start - 1 - off : UINT64_MAX;
			*slot = after_prev <= before_next ? i - 1 : i;
			*side = after_prev <= before_next ? 1 : -1;
			*pos = after_prev <= before_next ? after_prev : before_next;
			return KG_ARENA_AT_BAND;
		}
		if (i < n && off < start + a->slot[i].bytes) {
			*slot = i;
			*side = 0;
			*pos = off - start;
			return KG_ARENA_AT_TENSOR;
		}
		if (i < n)
			prev_end = start + a->slot[i].bytes;
	}
	return KG_ARENA_AT_NONE;
}

/* The outputs' span in the arena: from the first output's offset to the end of the last. */
void kg_arena_out_span(const struct kg_arena *a, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (int i = a->n_in; i < a->n_in + a->n_out; i++) {
		const struct kg_arena_slot *sl = &a->slot[i];
		if (sl->off < *lo)
			*lo = sl->off;
		if (sl->off + sl->bytes > *hi)
			*hi = sl->off + sl->bytes;
	}
	if (*hi <= *lo || *hi > a->used)
		*lo = *hi = 0;
}
