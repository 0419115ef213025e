/* Host memory past the policy's bound from a CUDA candidate's host code: twelve shared anonymous
 * mappings of 256 MiB, every page written, by raw system calls (nothing in the import table). The
 * CUDA runner has no RLIMIT_AS (the driver reserves terabytes of address space), so before kgate
 * 0.4 nothing bounded the sum; the supervisor now counts the process's memory as a whole, the
 * driver's /dev/nvidia* mappings aside: sandbox.memory under tests/data/gpu-memory.yaml (2048 MiB). */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	const long chunk = 256l << 20;
	for (int i = 0; i < 12; i++) {
		long p = sys6(9 /* mmap */, 0, chunk, 3 /* PROT_READ|PROT_WRITE */, 0x21 /* MAP_SHARED|MAP_ANONYMOUS */,
			      -1, 0);
		if (p < 0 && p > -4096)
			return -1;
		for (long off = 0; off < chunk; off += 4096)
			((volatile char *)p)[off] = 1;
	}
	return -1;
}
