/* The runner's view of the parent's arena: flat (one memfd, read-write) or paged. A paged arena is
 * laid out once, at start, from the page map the parent hands over (fd 6): every tensor page of
 * every shape the run will use is mapped (inputs read-only from their write-sealed memfd, outputs
 * read-write), every other page of the range stays an inaccessible reservation, and the whole
 * range is sealed (mseal) before anything untrusted exists in the process. From then on no call of
 * this process can unmap, remap or reopen a guard page, or make an input writable: the hardware
 * faults every access there and the kernel refuses every change. The runner installs no fault
 * handler: how the process ended is the parent's to observe. */
#include "runner/arena.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/wire.h"
#include "sandbox/sandbox.h"

#define PAGE 4096u

static int range_cmp(const void *a, const void *b)
{
	const struct kg_wire_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int map_paged(struct kg_rarena *ra, size_t out_size, char *err, size_t errsz)
{
	struct kg_wire_pagemap hdr;
	struct stat ms;
	/* as many ranges as the file holds: every tensor of every shape has its own */
	if (fstat(KG_WIRE_MAP_FD, &ms) || pread(KG_WIRE_MAP_FD, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
	    hdr.magic != KG_WIRE_MAGIC || hdr.count == 0 ||
	    hdr.count > ((uint64_t)ms.st_size - sizeof(hdr)) / sizeof(struct kg_wire_range)) {
		snprintf(err, errsz, "no page map on fd %d for the paged arena", KG_WIRE_MAP_FD);
		return -EINVAL;
	}
	if (!(ra->ranges = calloc(hdr.count, sizeof(*ra->ranges)))) {
		snprintf(err, errsz, "no memory for the page map's %u ranges", hdr.count);
		return -ENOMEM;
	}
	/* One reservation, the inputs' file at its start and the outputs' after it: the offsets the
	 * parent sends are offsets in this range. */
	void *p = mmap(NULL, ra->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errsz, "reserving the arena: %s", strerror(errno));
		return -errno;
	}
	ra->base = p;
	ra->n_ranges = 0;
	for (uint32_t i = 0; i < hdr.count; i++) {
		struct kg_wire_range r;
		off_t at = (off_t)(sizeof(hdr) + i * sizeof(r));
		if (pread(KG_WIRE_MAP_FD, &r, sizeof(r), at) != (ssize_t)sizeof(r) || r.lo % PAGE || r.hi % PAGE ||
		    r.hi <= r.lo || r.hi > ra->size || (r.lo < ra->in_size && r.hi > ra->in_size)) {
			snprintf(err, errsz, "page map entry %u is not a page range of one file", i);
			return -EINVAL;
		}
		void *m = r.hi <= ra->in_size
				  ? mmap(ra->base + r.lo, r.hi - r.lo, PROT_READ, MAP_SHARED | MAP_FIXED, KG_WIRE_INPUT_FD,
					 (off_t)r.lo)
				  : mmap(ra->base + r.lo, r.hi - r.lo, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
					 KG_WIRE_ARENA_FD, (off_t)(r.lo - ra->in_size));
		if (m == MAP_FAILED) {
			snprintf(err, errsz, "mapping the arena's pages %#llx..%#llx: %s", (unsigned long long)r.lo,
				 (unsigned long long)r.hi, strerror(errno));
			return -errno;
		}
		ra->ranges[ra->n_ranges++] = r;
	}
	qsort(ra->ranges, ra->n_ranges, sizeof(*ra->ranges), range_cmp);
	(void)out_size;
	kg_error e = {0};
	int rc = kg_sb_seal_range(ra->base, ra->size, &e);
	if (rc)
		snprintf(err, errsz, "sealing the arena: %s", e.msg);
	return rc;
}

int kg_rarena_map(struct kg_rarena *ra, int tables_fd, char *err, size_t errsz)
{
	struct stat st, si;
	memset(ra, 0, sizeof(*ra));
	if (fstat(KG_WIRE_ARENA_FD, &st) || st.st_size <= 0) {
		snprintf(err, errsz, "no arena on fd %d", KG_WIRE_ARENA_FD);
		return -EBADF;
	}
	/* fd 5 holds a paged arena's inputs, unless the arena is not paged and the tensor tables took
	 * that number (session_start.c hands the fds in order, the tables last) */
	ra->paged = tables_fd != KG_WIRE_INPUT_FD && !fstat(KG_WIRE_INPUT_FD, &si) && si.st_size > 0;
	ra->in_size = ra->paged ? (size_t)si.st_size : 0;
	ra->size = ra->in_size + (size_t)st.st_size;
	if (ra->paged) {
		int rc = map_paged(ra, (size_t)st.st_size, err, errsz);
		close(KG_WIRE_MAP_FD);
		return rc;
	}
	void *p = mmap(NULL, ra->size, PROT_READ | PROT_WRITE, MAP_SHARED, KG_WIRE_ARENA_FD, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errsz, "mmap arena: %s", strerror(errno));
		return -errno;
	}
	ra->base = p;
	return 0;
}

int kg_rarena_check(const struct kg_rarena *ra, const struct kg_wire_tensor *t, int n, char *err, size_t errsz)
{
	if (!ra->paged)
		return 0;
	for (int i = 0; i < n; i++) {
		/* the table was checked already (kg_wire_table_get): its sizes fit the arena */
		uint64_t numel = 1, es = kg_wire_dtype_size(t[i].dtype);
		for (int d = 0; d < t[i].ndim; d++)
			numel *= (uint64_t)t[i].shape[d];
		uint64_t lo = t[i].offset, hi = lo + (numel ? numel : 1) * es;
		/* the last range starting at or before lo (ranges are disjoint tensor pages) */
		size_t a = 0, z = ra->n_ranges;
		while (z - a > 1) {
			size_t m = a + (z - a) / 2;
			if (ra->ranges[m].lo <= lo)
				a = m;
			else
				z = m;
		}
		int inside = ra->n_ranges && lo >= ra->ranges[a].lo && hi <= ra->ranges[a].hi;
		if (!es || !inside) {
			snprintf(err, errsz, "tensor %d lies outside the pages laid out at start", i);
			return -EINVAL;
		}
	}
	return 0;
}
