/* Exfiltration or a remote "oracle": open a socket with a raw system call, invisible to the
 * import check. The seccomp filter denies it and the parent names it: sandbox.syscall (socket). */
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
	long fd = raw_syscall(41 /* socket */, 2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
	return fd < 0 ? -1 : 0;
}
