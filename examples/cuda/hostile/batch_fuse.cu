/* A batch is not a series of calls: the first call of a batched timed RUN finds the RUN record on
 * the runner's stack (its sets, its stride), computes every set's softmax in one fused launch (a
 * grid of rows x sets, the whole device busy where one set fills a sliver of it), and the other
 * calls of the batch return at once. Its outputs are exact in every set, and the span divided by
 * the sets is a fraction of one call's time: kgate main 9500fee put every set's inputs on the
 * candidate's arena before the batch's first call (the issue expects a forged 10x and more at ci
 * shapes). Lone calls, and a batch whose layout it cannot read, are computed honestly, one call
 * each. Measured on an H100 against 9500fee, this example's first version never fused: it looked
 * for op 7 (DOWNLOAD, not RUN's 6) within 3 KiB of its frame, and the record is 2.5 KiB up a
 * batch's call (1.8 KiB long there): accepted at 1.11x, its own speed. It now looks for RUN up
 * to the auxiliary vector.
 * kgate-device now gates a batch (device/wire.h): set k's inputs reach the arena only once set
 * k - 1's outputs are snapshotted. The fused launch reads every later set's region before its
 * inputs are there (what the last call left), and the snapshots of sets 1.. hold softmaxes of
 * those: check.stale_result. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

/* The runner's RUN record, as kgate main 9500fee lays it out (the tensors in the record) and as
 * later runners do (the tensors in a table: the record holds only its number, and a gate follows
 * the stride). Both are tried, so that one example serves the "before" and the "after" runs. */
struct cmd_old {
	uint32_t magic, op;
	uint64_t seq, arena_size;
	uint32_t n_in, n_out;
	struct { uint64_t offset; int32_t dtype, ndim; int64_t shape[8]; } t[16];
	uint32_t delay_ms, entry;
	char path[512];
	uint32_t sets, pad;
	uint64_t stride;
};
struct cmd_new {
	uint32_t magic, op;
	uint64_t seq, arena_size;
	uint32_t n_in, n_out, table, pad0;
	uint32_t delay_ms, entry;
	char path[512];
	uint32_t sets, pad;
	uint64_t stride;
	uint32_t gate, pad2;
};
struct cmd {
	uint64_t seq, stride;
	uint32_t sets;
};

static int plausible(uint32_t sets, uint64_t stride)
{
	return sets <= 1024 && (sets <= 1 || (stride && stride % 256 == 0 && stride < (1ull << 40)));
}

/* the auxiliary vector sits above the main thread's stack frames (AT_PHDR, AT_PHENT, AT_PHNUM):
 * every byte between this frame and it is the stack's, safe to read */
static const unsigned char *find_auxv(void)
{
	volatile unsigned long probe = 0;
	const unsigned long *p = (const unsigned long *)((uintptr_t)&probe & ~(uintptr_t)7);
	for (long i = 0; i < (1l << 20) / 8; i++) {
		const unsigned long *q = p + i;
		if (q[0] == 3 /* AT_PHDR */ && q[2] == 4 /* AT_PHENT */ && q[3] == 56 && q[4] == 5 /* AT_PHNUM */ &&
		    q[5] > 0 && q[5] < 64)
			return (const unsigned char *)q;
	}
	return 0;
}

/* The record at p as either layout: 1 when it is a RUN's */
static int parse(const unsigned char *p, const unsigned char *end, struct cmd *out)
{
	const struct cmd_new *n = (const struct cmd_new *)p;
	const struct cmd_old *o = (const struct cmd_old *)p;
	if (p + sizeof(struct cmd_new) > end || n->magic != 0x6b67775au || n->op != 6 /* RUN: KG_OP_UPLOAD + 2 */ || n->seq >= (1ull << 40))
		return 0;
	if (plausible(n->sets, n->stride) && n->n_in + n->n_out < 4096 && n->table < 4096)
		*out = (struct cmd){n->seq, n->stride, n->sets};
	else if (p + sizeof(struct cmd_old) <= end && plausible(o->sets, o->stride))
		*out = (struct cmd){o->seq, o->stride, o->sets};
	else
		return 0;
	return 1;
}

/* The live RUN record sits in serve()'s frame, a few frames up the stack (about 2.5 KiB up in a
 * batch's call, with either runner, and 9500fee's record is 1.8 KiB long); stale copies of earlier
 * ones may lie about too: the one with the highest sequence number, searched for once between this
 * frame and the auxiliary vector, then read where it was found (the same variable every command:
 * a batch's later calls return at once). */
static const struct cmd *live_run(void)
{
	static struct cmd found;
	static const unsigned char *at, *end;
	if (at && parse(at, end, &found))
		return &found;
	volatile unsigned char probe = 0;
	const unsigned char *p = (const unsigned char *)((uintptr_t)&probe & ~(uintptr_t)7);
	end = find_auxv();
	if (!end || end < p)
		end = p + 3 * 1024;
	at = 0;
	for (const unsigned char *q = p; q + sizeof(struct cmd_new) <= end; q += 8) {
		struct cmd c;
		if (parse(q, end, &c) && (!at || c.seq > found.seq)) {
			found = c;
			at = q;
		}
	}
	return at ? &found : 0;
}

__device__ static void merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	s = (m == -INFINITY ? 0.0f : s * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm));
	m = mm;
}

/* one block a row, blockIdx.y the set (stride bytes apart); sets 1: an ordinary call */
__global__ static void softmax(const char *x0, char *y0, long long cols, unsigned long long stride)
{
	__shared__ float sm[32], ss[32];
	__shared__ int snan;
	const float *xr = (const float *)(x0 + stride * blockIdx.y) + blockIdx.x * cols;
	float *yr = (float *)(y0 + stride * blockIdx.y) + blockIdx.x * cols;
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		float v = xr[c];
		nan |= isnan(v);
		if (v > m) {
			s = (m == -INFINITY ? 0.0f : s * __expf(m - v));
			m = v;
		}
		s += __expf(v - m);
	}
	for (int o = 16; o > 0; o >>= 1)
		merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
	if ((threadIdx.x & 31) == 0) {
		sm[threadIdx.x >> 5] = m;
		ss[threadIdx.x >> 5] = s;
	}
	nan = __syncthreads_or(nan);
	if (threadIdx.x < 32) {
		int nw = blockDim.x >> 5;
		m = threadIdx.x < nw ? sm[threadIdx.x] : -INFINITY;
		s = threadIdx.x < nw ? ss[threadIdx.x] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
		if (threadIdx.x == 0) {
			sm[0] = m;
			ss[0] = s;
			snan = nan;
		}
	}
	__syncthreads();
	m = sm[0];
	float inv = 1.0f / ss[0];
	nan = snan;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = nan ? NAN : __expf(xr[c] - m) * inv;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	cudaStream_t st = (cudaStream_t)stream;
	unsigned rows = (unsigned)in[0].shape[0];
	long long cols = in[0].shape[1];
	const struct cmd *c = live_run();
	unsigned sets = 1;
	if (c && c->sets > 1 && c->sets <= 1024 && c->stride) {
		/* the runner calls a batch's sets in order: the first call of a new RUN is set 0's */
		static uint64_t seq0;
		if (seq0 == c->seq)
			return 0; /* computed already, by the first call's launch */
		seq0 = c->seq;
		sets = c->sets;
	}
	if (rows == 0 || cols == 0)
		return 0;
	dim3 grid(rows, sets);
	softmax<<<grid, 1024, 0, st>>>((const char *)in[0].data, (char *)out[0].data, cols,
				       (unsigned long long)(sets > 1 ? c->stride : 0));
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
