/* Runner takeover: kg_forward never returns. It serves the parent's protocol itself, on the
 * runner's control socket (fd 3), with the right sequence numbers, through raw system calls that no
 * import shows. Where a call's inputs were in place before its RUN (kgate 0.2 loaded them before
 * UPLOAD and FLUSH), it computes the outputs when FLUSH arrives, streaming over a buffer as large as
 * the runner's flush so that the flush costs what an honest one does, and answers RUN at once,
 * claiming 1 us: accepted at a forged speedup under the strict gate.
 * kgate now writes a call's inputs only once that call's clock runs (its CPU time from before the
 * write to the process stopped after the reply) and stops the process between commands: the work
 * is charged whenever it is done, and the claim is a lie in every call (timing.tampered). */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
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

static void softmax(const float *x, float *y, int64_t rows, int64_t cols)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		if (m == -INFINITY)
			m = 0;
		for (int64_t c = 0; c < cols; c++)
			s += (yr[c] = expf(xr[c] - m));
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan || m == INFINITY ? NAN : yr[c] / s;
	}
}

/* What kgate 0.2's runner did at SETUP: each tensor's pages mapped from its file (inputs
 * read-only from fd 5, outputs from fd 4), at their offsets in the arena. */
static void remap(unsigned char *base, const struct cmd *c)
{
	struct {
		uint64_t dev, ino, nlink;
		uint32_t mode, uid, gid, pad;
		uint64_t rdev;
		int64_t size;
		int64_t rest[9];
	} st;
	if (raw_syscall(5 /* fstat */, 5, (long)&st, 0, 0, 0, 0))
		return;
	uint64_t in_size = (uint64_t)st.size;
	const struct tensor *t = table_of(c->table);
	for (uint32_t i = 0; i < c->n_in + c->n_out && i < 2; i++) {
		uint64_t n = 4;
		for (int d = 0; d < t[i].ndim; d++)
			n *= (uint64_t)t[i].shape[d];
		uint64_t lo = t[i].offset & ~4095ull, hi = (t[i].offset + n + 4095) & ~4095ull;
		if (i < c->n_in)
			raw_syscall(9 /* mmap */, (long)(base + lo), (long)(hi - lo), 1 /* PROT_READ */,
				    0x11 /* MAP_SHARED|MAP_FIXED */, 5, (long)lo);
		else
			raw_syscall(9, (long)(base + lo), (long)(hi - lo), 3, 0x11, 4, (long)(lo - in_size));
	}
}

static void compute(unsigned char *base)
{
	const struct tensor *t = table_of(cur);
	softmax((const float *)(base + t[0].offset), (float *)(base + t[1].offset), t[0].shape[0], t[0].shape[1]);
	/* more real work (1 ms or so): what the forged claim hides is worth something at any shape */
	volatile double spin = 0;
	for (int i = 0; i < 1000000; i++)
		spin += i;
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

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	softmax(in[0].data, out[0].data, in[0].shape[0], in[0].shape[1]);
	const struct cmd *now = live_run();
	if (!now)
		return 0; /* no runner to take over: an honest call */
	unsigned char *base = base_of(in, out);
	if (!base)
		return 0;
	static struct cmd c;
	static struct reply rep;
	memset(&rep, 0, sizeof(rep));
	rep.magic = 0x6b67775au;
	rep.op = RUN;
	rep.seq = now->seq;
	rep.elapsed_ns = 1000;
	size_t flush_len = 64u << 20;
	volatile unsigned char *flushbuf = malloc(flush_len);
	int computed = 0, flushes = 0;
	for (;;) {
		if (raw_syscall(44 /* sendto */, 3, (long)&rep, sizeof(rep), 0, 0, 0) < 0)
			raw_syscall(231 /* exit_group */, 0, 0, 0, 0, 0, 0);
		if (rep.op == QUIT)
			raw_syscall(231, 0, 0, 0, 0, 0, 0);
		long n = raw_syscall(45 /* recvfrom */, 3, (long)&c, sizeof(c), 0, 0, 0);
		if (n != (long)sizeof(c))
			raw_syscall(231, 0, 0, 0, 0, 0, 0);
		memset(&rep, 0, sizeof(rep));
		rep.magic = 0x6b67775au;
		rep.op = c.op;
		rep.seq = c.seq;
		switch (c.op) {
		case FLUSH:
			/* as long as a real flush, then the answer, before the clock starts */
			for (size_t i = 0; flushbuf && i < flush_len; i += 64)
				flushbuf[i]++;
			rep.info = flush_len;
			compute(base);
			computed = 1;
			flushes++;
			break;
		case RUN:
			if (!computed)
				compute(base);
			computed = 0;
			rep.elapsed_ns = 1000;
			break;
		case SETUP:
			/* kgate 0.2 mapped each shape's pages at SETUP (one FLUSH seen tells it): so does this */
			cur = c.table;
			if (flushes)
				remap(base, &c);
			break;
		default: /* UPLOAD, DOWNLOAD, SETTLE, NOP, QUIT: nothing to do on the CPU */
			break;
		}
	}
}
