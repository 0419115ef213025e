/* CPU backend of the runner: the candidate works directly on the shared arena; the cache flush
 * streams over a buffer twice the size of the last-level cache, allocated before the filter. The
 * backend and its state (flush buffer and size) live on one page that is sealed before the
 * candidate is loaded; the parent also checks the CPU time every flush took. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kg_common.h"
#include "runner/backend.h"

struct cpu_state {
	unsigned char *arena;
	unsigned char *flushbuf;
	size_t flushsz;
};

struct cpu_sealed {
	struct kg_rbackend b;
	struct cpu_state s;
};
static struct kg_rbackend cpu_backend;
KG_RUNNER_SEALED(struct cpu_sealed, sealed);
#define cpu (sealed.v.s)


static int cpu_init(struct kg_rbackend *b, void *arena, size_t arena_size, char *err, size_t errsz)
{
	(void)arena_size;
	cpu.arena = arena;
	long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
	if (llc <= 0)
		llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
	/* Virtual machines often report the whole socket's L3 (hundreds of MB) while a core only ever
	 * sees its own complex's slice: twice 32 MB covers the real thing at a bearable cost. */
	size_t sz = llc > 0 ? 2 * (size_t)llc : 64u << 20;
	if (sz < (8u << 20))
		sz = 8u << 20;
	if (sz > (64u << 20))
		sz = 64u << 20;
	cpu.flushbuf = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (cpu.flushbuf == MAP_FAILED) {
		snprintf(err, errsz, "cannot map a %zu-byte cache flush buffer: %s", sz, strerror(errno));
		return -errno;
	}
	memset(cpu.flushbuf, 1, sz); /* fault it in now, not inside the first flush */
	cpu.flushsz = sz;
	b->state = &cpu;
	return 0;
}

static int cpu_driver_fds(struct kg_rbackend *b, int *fds, int max)
{
	(void)b, (void)fds, (void)max;
	return 0;
}

static void *cpu_ptr(struct kg_rbackend *b, uint64_t offset)
{
	(void)b;
	return cpu.arena + offset;
}

static void *cpu_stream(struct kg_rbackend *b)
{
	(void)b;
	return NULL;
}

static int cpu_noop(struct kg_rbackend *b, size_t bytes, char *err, size_t errsz)
{
	(void)b, (void)bytes, (void)err, (void)errsz;
	return 0;
}

static int cpu_flush(struct kg_rbackend *b, uint64_t *bytes, char *err, size_t errsz)
{
	(void)b, (void)err, (void)errsz;
	/* Writing (not only reading) makes every line dirty and ours, evicting the candidate's data
	 * from all levels; the volatile sum keeps the compiler from dropping the pass. */
	volatile unsigned char sink = 0;
	for (size_t i = 0; i < cpu.flushsz; i += 64) {
		cpu.flushbuf[i] = (unsigned char)(cpu.flushbuf[i] + 1);
		sink ^= cpu.flushbuf[i];
	}
	(void)sink;
	*bytes = cpu.flushsz;
	return 0;
}

static int cpu_run(struct kg_rbackend *b, void (*fn)(void *), void *arg, struct kg_wire_reply *r, char *err,
		   size_t errsz)
{
	(void)b, (void)err, (void)errsz;
	r->info = 0; /* threads that outlive the call are caught by the parent's re-read instead */
	uint64_t t0 = kg_now_ns();
	fn(arg);
	r->elapsed_ns = kg_now_ns() - t0;
	return 0;
}

static int cpu_settle(struct kg_rbackend *b, uint32_t delay_ms, size_t bytes, char *err, size_t errsz)
{
	(void)b, (void)bytes, (void)err, (void)errsz;
	struct timespec ts = {.tv_sec = delay_ms / 1000, .tv_nsec = (long)(delay_ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return 0;
}

static struct kg_rbackend cpu_backend = {
	.name = "cpu",
	.init = cpu_init,
	.driver_fds = cpu_driver_fds,
	.ptr = cpu_ptr,
	.stream = cpu_stream,
	.upload = cpu_noop,
	.flush = cpu_flush,
	.run = cpu_run,
	.download = cpu_noop,
	.settle = cpu_settle,
};

struct kg_rbackend *kg_rbackend_cpu(void)
{
	if (!sealed.v.b.name) {
		sealed.v.b = cpu_backend;
		sealed.v.b.sealed = &sealed;
		sealed.v.b.sealed_len = sizeof(sealed);
	}
	return &sealed.v.b;
}
