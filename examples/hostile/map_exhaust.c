/* Any rejection becomes "not verified": the kernel's outputs are NaN (check.nan is recorded at the
 * first trial), and on its first call it fills the process's map count with one-page mappings, so
 * that the next SETUP's mmap fails in the runner. kgate 0.2 took a failed SETUP for its own error:
 * exit 3, the recorded check.nan gone. kgate maps the whole arena before the candidate is loaded
 * (SETUP maps nothing), and any failure of the candidate's runner is the candidate's: exit 1, the
 * check.nan kept. */
#include <kgate/kernel.h>
#include <math.h>
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

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static int filled;
	/* alternating protections keep neighbouring mappings from merging into one */
	for (int i = 0; !filled && i < 70000; i++) {
		long p = sys6(9 /* mmap */, 0, 4096, i & 1 ? 1 : 0, 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
		if (p < 0 && p > -4096)
			break;
	}
	filled = 1;
	float *y = out[0].data;
	int64_t n = in[0].shape[0] * in[0].shape[1];
	for (int64_t i = 0; i < n; i++)
		y[i] = NAN;
	return 0;
}
