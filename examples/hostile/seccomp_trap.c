/* Work before the clock starts, through a filter of its own: on its first call the kernel stacks a
 * seccomp filter that traps the runner's recvfrom into a SIGSYS handler of its own (its own
 * recvfrom, from one instruction, passes the filter). The handler receives each command for the
 * runner; on FLUSH (kgate 0.2 had the inputs in place by then) it computes the outputs, before the
 * clock starts, and the RUN that follows returns at once: accepted at a forged speedup. kgate
 * refuses every filter once the candidate is loaded and names the attempt (sandbox.tamper); the
 * inputs now come with the call, and the process does not run between commands. */
#define _GNU_SOURCE
#include <kgate/kernel.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

KG_CANDIDATE;

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

/* the one recvfrom the filter lets through: its instruction pointer after the syscall */
__asm__(".text\n.globl kg_hostile_recv\nkg_hostile_recv:\n\tmov %rcx, %r10\n\tmov $45, %eax\n\tsyscall\n"
	".globl kg_hostile_recv_end\nkg_hostile_recv_end:\n\tret\n"
	".globl kg_hostile_restorer\nkg_hostile_restorer:\n\tmov $15, %eax\n\tsyscall\n");
long kg_hostile_recv(long fd, long buf, long len, long flags, long addr, long alen);
void kg_hostile_recv_end(void);
void kg_hostile_restorer(void);

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

static unsigned char *arena_base;
static volatile int computed;

static void on_sys(int sig, siginfo_t *si, void *ucv)
{
	(void)sig, (void)si;
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	long n = kg_hostile_recv(g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]);
	g[REG_RAX] = n;
	const struct cmd *c = (const struct cmd *)g[REG_RSI];
	if (n == (long)sizeof(*c) && c->magic == 0x6b67775au && c->op == SETUP)
		cur = c->table;
	if (n == (long)sizeof(*c) && c->magic == 0x6b67775au && c->op == FLUSH && arena_base) {
		const struct tensor *t = table_of(cur);
		softmax((const float *)(arena_base + t[0].offset), (float *)(arena_base + t[1].offset), t[0].shape[0],
			t[0].shape[1]);
		computed = 1;
	}
}

static void arm(const kg_tensor *in, const kg_tensor *out)
{
	const struct cmd *now = live_run();
	if (!now || !(arena_base = base_of(in, out)))
		return;
	uint64_t ip = (uint64_t)(uintptr_t)kg_hostile_recv_end;
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 45, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ip, 0, 2),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(ip >> 32), 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fp = {.len = sizeof(prog) / sizeof(prog[0]), .filter = prog};
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} act = {(void *)on_sys, 0x04000004ul /* SA_RESTORER|SA_SIGINFO */, (void *)kg_hostile_restorer, 0};
	if (sys6(317 /* seccomp */, SECCOMP_SET_MODE_FILTER, 0, (long)&fp, 0, 0, 0) == 0)
		sys6(13 /* rt_sigaction */, SIGSYS, (long)&act, 0, 8, 0, 0);
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static int armed;
	if (computed) {
		computed = 0; /* done before the clock started */
		return 0;
	}
	softmax(in[0].data, out[0].data, in[0].shape[0], in[0].shape[1]);
	if (!armed++)
		arm(in, out);
	return 0;
}
