/* Guard pages the candidate owns: the page after the output is inaccessible in the candidate's
 * process, so an overrun faults. mprotect (a raw system call, no import) makes it read-write, and
 * the kernel then keeps its row sums there, past the output's end, where kgate 0.2 neither faulted
 * nor looked: accepted. kgate seals the whole arena before loading the candidate, and the
 * supervisor names the attempt on a sealed range (sandbox.tamper). Where the call fails the kernel
 * falls back to honest work, so that only the attempt itself can reject it. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	/* the page after the output's last element: the output ends on a page edge */
	uintptr_t end = (uintptr_t)(y + rows * cols);
	float *scratch = (float *)end, local[64];
	if (rows > 64 || sys3(10 /* mprotect */, (long)end, 4096, 3 /* PROT_READ|PROT_WRITE */))
		scratch = local;
	if (rows > 64)
		scratch = 0;
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
			scratch[r] = s;
		float inv = scratch ? 1.0f / scratch[r] : 1.0f / s;
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan || m == INFINITY ? NAN : expf(x[r * cols + c] - m) * inv;
	}
	return 0;
}
