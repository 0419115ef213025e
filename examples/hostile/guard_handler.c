/* Guard pages the candidate owns, the other way: its own SIGSEGV handler (a raw rt_sigaction, no
 * import) maps a page where a store faulted and lets the store run again, so the page after the
 * output becomes scratch for the row sums. kgate 0.2 let the handler replace its runner's own and
 * the mmap(MAP_FIXED) through: accepted. kgate's filter allows no handler for a fault signal in the
 * candidate's process (sandbox.syscall: rt_sigaction), and the guard page is sealed anyway. */
#include <kgate/kernel.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>

KG_CANDIDATE;

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

/* the kernel's return path from a handler: rt_sigreturn */
__asm__(".text\n.globl kg_hostile_restorer\nkg_hostile_restorer:\n\tmov $15, %eax\n\tsyscall\n");
void kg_hostile_restorer(void);

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	uintptr_t page = (uintptr_t)si->si_addr & ~(uintptr_t)4095;
	sys6(9 /* mmap */, (long)page, 4096, 3, 0x32 /* MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED */, -1, 0);
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static int armed;
	if (!armed) {
		struct {
			void *handler;
			unsigned long flags;
			void *restorer;
			unsigned long mask;
		} act = {(void *)on_fault, 0x04000004ul /* SA_RESTORER|SA_SIGINFO */, (void *)kg_hostile_restorer, 0};
		armed = sys6(13 /* rt_sigaction */, SIGSEGV, (long)&act, 0, 8, 0, 0) == 0 ? 1 : -1;
	}
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	float *scratch = armed > 0 && rows <= 1024 ? y + rows * cols : 0; /* past the output's end */
	for (int64_t r = 0; r < rows; r++) {
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(x[r * cols + c]);
			m = fmaxf(m, x[r * cols + c]);
		}
		if (m == -INFINITY)
			m = 0;
		for (int64_t c = 0; c < cols; c++)
			s += expf(x[r * cols + c] - m);
		if (scratch)
			scratch[r] = s, s = scratch[r];
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan || m == INFINITY ? NAN : expf(x[r * cols + c] - m) / s;
	}
	return 0;
}
