/* Forge the result channel: find the runner's current command on the stack (harness memory),
 * then send the parent a forged "RUN done in 1 ns" reply for it over the runner's control socket
 * (fd 3). The parent only believes a time its own clock can bound: timing.tampered. */
#include <kgate/kernel.h>
#include <math.h>
#include <string.h>
#include "raw_syscall.h"
KG_CANDIDATE;
struct forged {
	unsigned magic, op;
	unsigned long long seq;
	int status, rc;
	unsigned long long elapsed_ns, info;
	char msg[400];
};
/* The runner's command record sits a few frames up the stack: magic, op, seq. */
static int find_run_seq(unsigned long long *seq)
{
	volatile unsigned char probe = 0;
	const unsigned char *p = (const unsigned char *)&probe;
	for (long off = 0; off < 48 * 1024; off += 4) {
		unsigned magic, op;
		memcpy(&magic, p + off, 4);
		memcpy(&op, p + off + 4, 4);
		if (magic == 0x6b67775au && op == 6) {
			memcpy(seq, p + off + 8, 8);
			return 1;
		}
	}
	return 0;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	/* Real work, slowly, so that a forged 1 ns claim is worth something. */
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
	volatile double spin = 0;
	for (int i = 0; i < 2000000; i++)
		spin += i;
	/* The forged reply goes out after the work: it claims the call took 1 ns. */
	struct forged f;
	memset(&f, 0, sizeof(f));
	f.magic = 0x6b67775au;
	f.op = 6; /* RUN */
	f.elapsed_ns = 1;
	if (find_run_seq(&f.seq))
		raw_syscall(1 /* write */, 3, (long)&f, sizeof(f));
	return 0;
}
