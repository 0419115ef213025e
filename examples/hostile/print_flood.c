/* Output flood: write to stdout without end through raw system calls (a denial of service on
 * the log collector). Capture is bounded and the flood is cut: sandbox.output_limit. */
#include <kgate/kernel.h>
/* A raw x86-64 system call, bypassing libc so that no import shows it. */
static long raw_syscall(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	static char line[65536];
	for (unsigned i = 0; i < sizeof(line); i++)
		line[i] = 'A' + (char)(i % 26);
	for (;;)
		raw_syscall(1 /* write */, 1, (long)line, sizeof(line));
	return 0;
}
