/* Raw x86-64 system calls for the hostile examples: they bypass libc on purpose, so the static
 * import check cannot see them and the sandbox's seccomp filter must. */
#ifndef KG_RAW_SYSCALL_H
#define KG_RAW_SYSCALL_H
static inline long raw_syscall(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
#endif
