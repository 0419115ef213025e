/* Any rejection becomes "not verified", the other way: kg_forward takes the runner's protocol over
 * (as own_protocol.c does), writes NaN outputs (check.nan is recorded), and answers the next SETUP
 * with the runner's own error status. kgate 0.2 took a SETUP that failed for its own error (exit
 * 3, the check.nan gone). What the candidate's runner fails is the candidate's (sandbox.protocol,
 * its message quoted as its claim), and a recorded rejection stands: exit 1. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

KG_CANDIDATE;

static long raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

/* The runner's records, as runner/wire.h lays them out: a command names its tensors by the number
 * of a table in the tensor tables, which the runner read into its heap at start. */
struct tensor {
	uint64_t offset;
	int32_t dtype, ndim;
	int64_t shape[8];
};
struct cmd {
	uint32_t magic, op;
	uint64_t seq, arena_size;
	uint32_t n_in, n_out, table, pad0;
	uint32_t delay_ms, entry;
	char path[512];
	uint32_t sets, pad;
	uint64_t stride;
};
struct reply {
	uint32_t magic, op;
	uint64_t seq;
	int32_t status, rc;
	uint64_t elapsed_ns, info, snap_ns;
	uint32_t flags, tid;
	char msg[400];
};
enum { SETUP = 3, UPLOAD, FLUSH, RUN, DOWNLOAD, SETTLE, NOP, QUIT };

/* The runner's copy of the tensor tables: a header (the wire's magic, a count), the tables' heads,
 * their tensors. It lies in the runner's heap below the descriptors kg_forward is handed (read at
 * start, before anything else the runner allocates there after). */
struct tab_head {
	uint64_t at;
	uint32_t n_in, n_out;
};
static const unsigned char *tables;
static uint32_t cur; /* the current SETUP's table */

static const unsigned char *find_tables(const void *near)
{
	const unsigned char *p = (const unsigned char *)((uintptr_t)near & ~(uintptr_t)7);
	for (long off = 8; off < (8l << 20); off += 8) {
		const uint32_t *h = (const uint32_t *)(const void *)(p - off);
		if (h[0] != 0x6b67775au || !h[1] || h[1] > 64)
			continue;
		const struct tab_head *th = (const struct tab_head *)(const void *)(h + 2);
		int ok = 1;
		for (uint32_t k = 0; k < h[1] && ok; k++)
			ok = th[k].at % 8 == 0 && th[k].at < (1u << 20) && th[k].n_in == 1 && th[k].n_out == 1;
		if (ok)
			return (const unsigned char *)h;
	}
	return NULL;
}

/* Table k's tensors (input, output). */
static const struct tensor *table_of(uint32_t k)
{
	const struct tab_head *th = (const struct tab_head *)(const void *)(tables + 8);
	return (const struct tensor *)(const void *)(tables + th[k].at);
}

/* The arena's base in this process: the table whose tensors are this call's. */
static unsigned char *base_of(const kg_tensor *in, const kg_tensor *out)
{
	if (!tables && !(tables = find_tables(in)))
		return NULL;
	uint32_t count = ((const uint32_t *)(const void *)tables)[1];
	for (uint32_t k = 0; k < count; k++) {
		const struct tensor *t = table_of(k);
		if (t[0].shape[0] == in[0].shape[0] && t[0].shape[1] == in[0].shape[1] &&
		    (intptr_t)(t[1].offset - t[0].offset) == (char *)out[0].data - (char *)in[0].data) {
			cur = k;
			return (unsigned char *)in[0].data - t[0].offset;
		}
	}
	return NULL;
}

/* The runner's command record sits a few frames up the stack; stale copies of earlier commands lie
 * about too: the live one has the highest sequence number. */
static const struct cmd *live_run(void)
{
	volatile unsigned char probe = 0;
	const unsigned char *p = (const unsigned char *)((uintptr_t)&probe & ~(uintptr_t)7);
	const struct cmd *best = NULL;
	for (long off = 0; off < 3 * 1024; off += 8) {
		const struct cmd *c = (const struct cmd *)(p + off);
		if (c->magic == 0x6b67775au && c->op == RUN && c->seq < (1ull << 40) && (!best || c->seq > best->seq))
			best = c;
	}
	return best;
}

static void nan_outputs(unsigned char *base)
{
	const struct tensor *t = table_of(cur);
	uint64_t n = 1;
	for (int d = 0; d < t[1].ndim; d++)
		n *= (uint64_t)t[1].shape[d];
	float *y = (float *)(base + t[1].offset);
	for (uint64_t i = 0; i < n; i++)
		y[i] = NAN;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int64_t n = in[0].shape[0] * in[0].shape[1];
	for (int64_t i = 0; i < n; i++)
		((float *)out[0].data)[i] = NAN;
	const struct cmd *now = live_run();
	if (!now)
		return 0;
	unsigned char *base = base_of(in, out);
	if (!base)
		return 0;
	static struct cmd c;
	static struct reply rep;
	memset(&rep, 0, sizeof(rep));
	rep.magic = 0x6b67775au;
	rep.op = RUN;
	rep.seq = now->seq;
	for (;;) {
		if (raw_syscall(44 /* sendto */, 3, (long)&rep, sizeof(rep), 0, 0, 0) < 0 || rep.op == QUIT)
			raw_syscall(231 /* exit_group */, 0, 0, 0, 0, 0, 0);
		if (raw_syscall(45 /* recvfrom */, 3, (long)&c, sizeof(c), 0, 0, 0) != (long)sizeof(c))
			raw_syscall(231, 0, 0, 0, 0, 0, 0);
		memset(&rep, 0, sizeof(rep));
		rep.magic = 0x6b67775au;
		rep.op = c.op;
		rep.seq = c.seq;
		if (c.op == SETUP) {
			rep.status = 1; /* KG_WS_ERROR */
			memcpy(rep.msg, "laying out the arena's guard pages: Cannot allocate memory", 59);
		} else if (c.op == RUN || c.op == FLUSH) {
			nan_outputs(base);
		}
	}
}
