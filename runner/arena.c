/* The runner's view of the parent's arena: flat (one memfd, read-write) or paged (inputs mapped
 * read-only from their sealed memfd, outputs read-write, an unmapped page between tensors), and a
 * fault handler that tells the parent which arena offset a killed candidate touched. The parent
 * trusts none of it: the seal on the inputs' memfd is the kernel's, and the named offset only
 * names a crash that is a rejection anyway. */
#include "runner/arena.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/wire.h"

#define PAGE 4096u

static struct kg_rarena *fault_arena; /* what the handler names offsets in */

int kg_rarena_map(struct kg_rarena *ra, char *err, size_t errsz)
{
	struct stat st, si;
	memset(ra, 0, sizeof(*ra));
	if (fstat(KG_WIRE_ARENA_FD, &st) || st.st_size <= 0) {
		snprintf(err, errsz, "no arena on fd %d", KG_WIRE_ARENA_FD);
		return -EBADF;
	}
	ra->paged = !fstat(KG_WIRE_INPUT_FD, &si) && si.st_size > 0;
	ra->in_size = ra->paged ? (size_t)si.st_size : 0;
	ra->size = ra->in_size + (size_t)st.st_size;
	if (!ra->paged) {
		void *p = mmap(NULL, ra->size, PROT_READ | PROT_WRITE, MAP_SHARED, KG_WIRE_ARENA_FD, 0);
		if (p == MAP_FAILED) {
			snprintf(err, errsz, "mmap arena: %s", strerror(errno));
			return -errno;
		}
		ra->base = p;
		return 0;
	}
	/* One reservation, the inputs' file read-only at its start and the outputs' after it: the
	 * offsets the parent sends are offsets in this range. The inputs' memfd is sealed against
	 * writes, so neither this mapping nor any later one can be made writable. */
	void *p = mmap(NULL, ra->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errsz, "reserving the arena: %s", strerror(errno));
		return -errno;
	}
	ra->base = p;
	if (mmap(ra->base, ra->in_size, PROT_READ, MAP_SHARED | MAP_FIXED, KG_WIRE_INPUT_FD, 0) == MAP_FAILED ||
	    mmap(ra->base + ra->in_size, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 KG_WIRE_ARENA_FD, 0) == MAP_FAILED) {
		snprintf(err, errsz, "mapping the arena: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

static uint64_t dtype_size(int32_t dt)
{
	static const uint64_t size[] = {[KG_F32] = 4, [KG_F16] = 2, [KG_BF16] = 2, [KG_I32] = 4, [KG_I64] = 8, [KG_U8] = 1};
	return dt >= 0 && dt <= KG_U8 ? size[dt] : 0;
}

static int map_range(struct kg_rarena *ra, uint64_t lo, uint64_t hi, int guard)
{
	if (hi <= lo)
		return 0;
	void *at = ra->base + lo, *p;
	if (guard)
		p = mmap(at, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	else if (hi <= ra->in_size)
		p = mmap(at, hi - lo, PROT_READ, MAP_SHARED | MAP_FIXED, KG_WIRE_INPUT_FD, (off_t)lo);
	else
		p = mmap(at, hi - lo, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, KG_WIRE_ARENA_FD,
			 (off_t)(lo - ra->in_size));
	return p == MAP_FAILED ? -errno : 0;
}

int kg_rarena_guard(struct kg_rarena *ra, const struct kg_wire_tensor *t, int n, char *err, size_t errsz)
{
	if (!ra->paged)
		return 0;
	uint64_t cur = 0;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		uint64_t numel = 1, es = dtype_size(t[i].dtype);
		for (int d = 0; d < t[i].ndim; d++)
			numel *= (uint64_t)t[i].shape[d];
		uint64_t lo = t[i].offset / PAGE * PAGE, end = t[i].offset + numel * es;
		uint64_t hi = (end + PAGE - 1) / PAGE * PAGE;
		/* tensors come in offset order, each within one of the two files */
		if (!es || lo < cur || hi > ra->size || (lo < ra->in_size && hi > ra->in_size)) {
			snprintf(err, errsz, "tensor %d does not fit the paged arena", i);
			return -EINVAL;
		}
		if (!(rc = map_range(ra, cur, lo, 1)))
			rc = map_range(ra, lo, hi, 0);
		cur = hi;
	}
	if (!rc)
		rc = map_range(ra, cur, ra->size, 1);
	if (rc)
		snprintf(err, errsz, "laying out the arena's guard pages: %s", strerror(-rc));
	return rc;
}

/* Async-signal-safe: a fixed line with the offset in hex, then the default action (the store or
 * load is retried and kills the process; the parent sees the signal). */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	struct kg_rarena *ra = fault_arena;
	uintptr_t a = (uintptr_t)si->si_addr, b = ra ? (uintptr_t)ra->base : 0;
	if (ra && a >= b && a - b < ra->size) {
		char line[80] = KG_RARENA_FAULT_TAG "0x";
		size_t n = strlen(line);
		uint64_t off = a - b;
		int digits = 1;
		while (digits < 16 && off >> (4 * digits))
			digits++;
		for (int d = digits - 1; d >= 0; d--)
			line[n++] = "0123456789abcdef"[(off >> (4 * d)) & 15];
		line[n++] = '\n';
		ssize_t w = write(2, line, n);
		(void)w;
	}
	signal(sig, SIG_DFL);
}

void kg_rarena_fault_names(struct kg_rarena *ra)
{
	static unsigned char altstack[64 * 1024];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
	sigaltstack(&ss, NULL);
	fault_arena = ra;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
}
