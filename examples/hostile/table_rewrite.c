/* The tensor tables rewritten from inside: the runner read every shape's tensor table into its own
 * heap at start (runner/wire.h), and rebuilds the descriptors it hands kg_forward from the current
 * table on every call. This candidate finds that copy below its descriptors and points its output
 * at its input in every table, then computes honestly into whatever it is handed, writing nothing
 * where its output and input are the same (a read-only page). The runner's copy is the candidate's
 * to scribble on, like everything in its process; the parent judges the outputs it laid out, where
 * nothing was written: check.unwritten_output, never an acceptance, never exit 3. */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

struct tensor {
	uint64_t offset;
	int32_t dtype, ndim;
	int64_t shape[8];
};
struct tab_head {
	uint64_t at;
	uint32_t n_in, n_out;
};

static int rewritten;

/* The tables' header (the wire's magic, a count) and its heads, searched downward from near. */
static unsigned char *find_tables(const void *near)
{
	unsigned char *p = (unsigned char *)((uintptr_t)near & ~(uintptr_t)7);
	for (long off = 8; off < (8l << 20); off += 8) {
		uint32_t *h = (uint32_t *)(void *)(p - off);
		if (h[0] != 0x6b67775au || !h[1] || h[1] > 64)
			continue;
		struct tab_head *th = (struct tab_head *)(void *)(h + 2);
		int ok = 1;
		for (uint32_t k = 0; k < h[1] && ok; k++)
			ok = th[k].at % 8 == 0 && th[k].at < (1u << 20) && th[k].n_in == 1 && th[k].n_out == 1;
		if (ok)
			return (unsigned char *)h;
	}
	return 0;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 1 || n_out != 1)
		return -22;
	if (!rewritten++) {
		unsigned char *tabs = find_tables(in);
		if (tabs) {
			uint32_t count = ((uint32_t *)(void *)tabs)[1];
			struct tab_head *th = (struct tab_head *)(void *)(tabs + 8);
			for (uint32_t k = 0; k < count; k++) {
				struct tensor *t = (struct tensor *)(void *)(tabs + th[k].at);
				t[1].offset = t[0].offset;
			}
		}
	}
	if (out[0].data == in[0].data)
		return 0;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float m = -INFINITY, s = 0;
		for (int64_t c = 0; c < cols; c++)
			m = fmaxf(m, x[r * cols + c]);
		for (int64_t c = 0; c < cols; c++)
			s += (y[r * cols + c] = expf(x[r * cols + c] - m));
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] /= s;
	}
	return 0;
}
