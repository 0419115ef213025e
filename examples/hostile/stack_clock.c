/* Clock skew without touching sealed memory: the runner's start time sits in a register it saved,
 * or on its stack, while kg_forward runs. The candidate finds that word (a CLOCK_MONOTONIC reading
 * from just before the call) and moves it forward, so the runner claims 1% of the real time. Only
 * the trusted side's own measure of the call (the CPU time the kernel charged to the runner's
 * process) shows the lie: timing.tampered. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

static long raw_syscall(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
KG_CANDIDATE;

static uint64_t now_ns(void)
{
	struct timespec ts;
	raw_syscall(228 /* clock_gettime */, CLOCK_MONOTONIC, (long)&ts, 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void softmax(const kg_tensor *in, kg_tensor *out)
{
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
}

__attribute__((noinline)) static void skew(uint64_t t_in, uint64_t t_out)
{
	/* Every callee-saved register is spilled into our frames, so the runner's start time is in
	 * memory just above us wherever the compiler kept it. */
	__asm__ volatile("" ::: "rbx", "r12", "r13", "r14", "r15", "memory");
	volatile uint64_t *sp = (volatile uint64_t *)__builtin_frame_address(0);
	for (int i = 0; i < 512; i++) {
		uint64_t v = sp[i];
		if (v <= t_in && v + 50000000ull > t_in)
			sp[i] = t_out - (t_out - v) / 100;
	}
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	uint64_t t_in = now_ns();
	softmax(in, out);
	/* more real work (1 ms or so), so that the 99 % hidden is worth something at any shape */
	volatile double spin = 0;
	for (int i = 0; i < 1000000; i++)
		spin += i;
	skew(t_in, now_ns());
	return 0;
}
