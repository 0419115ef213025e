/* Work at load time: a constructor runs before kg_forward is ever called, here trying to fork a
 * helper process with a raw system call. kgate loads candidates only after the filter is on:
 * sandbox.syscall (fork). */
#include <kgate/kernel.h>
/* A raw x86-64 system call, bypassing libc so that no import shows it. */
static long raw_syscall(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
KG_CANDIDATE;
__attribute__((constructor)) static void at_load(void)
{
	raw_syscall(57 /* fork */, 0, 0, 0);
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	return 0;
}
