/* No bound on the whole run: kg_forward takes the runner's protocol over (as own_protocol.c does)
 * and answers every command but RUN only after 25 s, within the 30 s kgate 0.2 gave each command:
 * its session ran until the policy's wall-clock budget (an hour under the default policy, 120 s
 * under ci). kgate gives each command a deadline scaled to its work (3 s plus a copy's time at
 * 1 GB/s): sandbox.timeout within seconds. */
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

/* The runner's records, as runner/wire.h lays them out (a command's tensors are a table's number). */
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
	float *y = out[0].data;
	int64_t n = in[0].shape[0] * in[0].shape[1];
	for (int64_t i = 0; i < n; i++)
		y[i] = 1.0f / (float)in[0].shape[1]; /* wrong, but nobody will get to look */
	const struct cmd *now = live_run();
	if (!now)
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
		if (c.op != RUN && c.op != QUIT) {
			struct {
				long s, ns;
			} t = {25, 0};
			raw_syscall(35 /* nanosleep */, (long)&t, 0, 0, 0, 0, 0);
		}
	}
}
