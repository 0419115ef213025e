/* Memory past the policy's bound in shared anonymous mappings: six of 256 MiB, every page written,
 * held from the first call on (a table of precomputed answers, or the host's memory taken), then
 * an honest softmax. Each mapping is under the bound; only their sum is over it. kgate 0.3 counted
 * no shared memory where the address space was unbounded (a ModelNew held 5 GiB so under a
 * 4096 MiB policy); the supervisor now counts the process's memory as a whole, each shared object
 * once, and a shared mmap reaches it before it runs: sandbox.memory. Raw system calls: nothing in
 * the import table says mmap. Run it under tests/data/memory.yaml (1024 MiB). */
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

static void hold(void)
{
	static int held;
	const long chunk = 256l << 20;
	for (int i = 0; !held && i < 6; i++) {
		long p = sys6(9 /* mmap */, 0, chunk, 3 /* PROT_READ|PROT_WRITE */, 0x21 /* MAP_SHARED|MAP_ANONYMOUS */,
			      -1, 0);
		if (p < 0 && p > -4096)
			break;
		for (long off = 0; off < chunk; off += 4096)
			((volatile char *)p)[off] = 1;
	}
	held = 1;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 1 || n_out != 1)
		return -22;
	hold();
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -INFINITY, s = 0.0f;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			float v = xr[c];
			nan |= isnan(v);
			if (v == -INFINITY)
				continue;
			if (v > m) {
				s = s * expf(m - v);
				m = v;
			}
			s += expf(v - m);
		}
		float inv = 1.0f / s;
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan ? NAN : expf(xr[c] - m) * inv;
	}
	return 0;
}
