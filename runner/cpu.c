/* CPU backend of the runner: the candidate works directly on the shared arena. There is no cache
 * flush here: the parent writes the arena (inputs, poisoned outputs, canaries) with streaming
 * stores, which leave none of it in any cache level of any core, and it writes the inputs only once
 * the call's clock runs. The backend's state lives on one page sealed before the candidate is
 * loaded. */
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
	(void)arena_size, (void)err, (void)errsz;
	cpu.arena = arena;
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
