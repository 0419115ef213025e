/* New code at run time: an anonymous mapping made writable and executable with a raw mmap (no
 * import shows it), code written into it and called, as a JIT or a decrypted payload would be.
 * After loading the candidate the runner is sealed against new executable mappings:
 * sandbox.dlopen. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>

static long raw_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}
KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static int (*jit)(void);
	if (!jit) {
		long p = raw_syscall6(9 /* mmap */, 0, 4096, 7 /* RWX */, 0x22 /* PRIVATE|ANONYMOUS */, -1, 0);
		if (p < 0 && p > -4096)
			return 0;
		static const unsigned char code[] = {0x31, 0xc0, 0xc3}; /* xor eax,eax; ret */
		for (unsigned i = 0; i < sizeof(code); i++)
			((volatile unsigned char *)p)[i] = code[i];
		jit = (int (*)(void))p;
	}
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(x[r * cols + c]);
			m = fmaxf(m, x[r * cols + c]);
		}
		for (int64_t c = 0; c < cols; c++)
			s += expf(x[r * cols + c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : expf(x[r * cols + c] - m) / s;
	}
	return jit();
}
