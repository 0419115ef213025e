/* kgate-device's own kernels, built by nvcc into a fatbin that kgate-device embeds (device/
 * module.mk; without nvcc it has none, and kgate stages everything from the host as before). They
 * run in the keeper's context on its private memory: no candidate's context ever sees them.
 * kg_gen_fill draws a tensor with the generator's core (common/kg_gen.h, the same source as the
 * host's, compiled with -fmad=false: the same bits); kg_first_diff finds the first 8-byte word in
 * which two buffers differ (the candidate's inputs against the pristine copy); kg_flush evicts the
 * L2 by writing twice its size (on the compute engine, so that its time shows what else held the
 * device beside it: the quiet-device probe). */
#include <stdint.h>

#include "kg_gen.h"

struct kg_gen_args {
	struct kg_gen_tensor t;
	uint32_t key[8];
	const struct kg_gen_zig *z;
	void *dst;
	unsigned long long stride; /* bytes from one set's draw to the next's (blockIdx.y: the set) */
};

/* one thread a group of eight elements (one ChaCha block), grid-strided; one row of blocks a set,
 * each under its own key (kg_gen_set_key) */
extern "C" __global__ void kg_gen_fill(struct kg_gen_args a)
{
	uint32_t key[8];
	kg_gen_set_key(a.key, blockIdx.y, key);
	a.dst = (char *)a.dst + a.stride * blockIdx.y;
	uint64_t groups = (a.t.n + 7) / 8;
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
		uint64_t lo = g * 8, hi = lo + 8 < a.t.n ? lo + 8 : a.t.n;
		kg_gen_range(&a.t, key, a.z, a.dst, lo, hi);
	}
}

/* *first (set to all ones before) becomes the least index i < n with x[i] != y[i] */
extern "C" __global__ void kg_first_diff(const unsigned long long *x, const unsigned long long *y,
					 unsigned long long n, unsigned long long *first)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		if (x[i] != y[i]) {
			atomicMin(first, i);
			return;
		}
}

/* [0, width) of each of `sets` sets stride bytes apart, from src to dst (16-byte words: the
 * keeper calls it only where every offset and width is a multiple of 16) */
extern "C" __global__ void kg_copy_sets(uint4 *dst, const uint4 *src, unsigned long long width,
					unsigned long long stride, unsigned long long sets)
{
	unsigned long long w = width / 16, per = stride / 16, n = w * sets;
	unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		unsigned long long set = i / w, at = set * per + i % w;
		dst[at] = src[at];
	}
}

/* the same a byte at a time, where offsets or widths are not multiples of 16 */
extern "C" __global__ void kg_copy_sets_b(unsigned char *dst, const unsigned char *src, unsigned long long width,
					  unsigned long long stride, unsigned long long sets)
{
	unsigned long long n = width * sets, step = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		unsigned long long at = i / width * stride + i % width;
		dst[at] = src[at];
	}
}

/* the L2 flush: n 16-byte words of p written with a pattern of v's (a new v every flush) */
extern "C" __global__ void kg_flush(uint4 *p, unsigned long long n, unsigned v)
{
	uint4 w = make_uint4(v, v ^ 0x9e3779b9u, v + 1u, ~v);
	unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
		p[i] = w;
}

/* ---- outputs judged (device/judge.h): one block a run of rows, a partial result per block,
 * merged in order by kgate-device ---- */
#include "device/judge.h"

#define JUDGE_THREADS 128

struct kg_judge_args {
	struct kg_dev_check c;
	const void *got, *exp; /* COMPARE: the candidate's snapshot, the reference's; STATS: got */
	struct kg_dev_cmp *part;
	unsigned long long len, rows, per; /* elements a row, rows, rows a block */
	int factor; /* fit each row's factor */
};

__device__ static void block_merge(struct kg_dev_cmp *sh, unsigned tid)
{
	__syncthreads();
	for (unsigned s = JUDGE_THREADS / 2; s > 0; s >>= 1) {
		if (tid < s)
			kg_judge_merge(&sh[tid], &sh[tid + s]);
		__syncthreads();
	}
}

extern "C" __global__ void kg_judge(struct kg_judge_args a)
{
	__shared__ struct kg_dev_cmp sh[JUDGE_THREADS];
	__shared__ double sgx[JUDGE_THREADS], sxx[JUDGE_THREADS];
	unsigned tid = threadIdx.x, es = kg_gen_dtype_size(a.c.dtype);
	uint64_t pw = kg_judge_poison_word(a.c.poison, es);
	struct kg_dev_cmp p;
	kg_judge_init(&p);
	uint64_t r0 = (uint64_t)blockIdx.x * a.per, r1 = r0 + a.per < a.rows ? r0 + a.per : a.rows;
	for (uint64_t row = r0; row < r1; row++) {
		uint64_t lo = row * a.len, hi = lo + a.len < a.c.n ? lo + a.len : a.c.n;
		if (a.c.mode == KG_DEV_CHK_STATS) {
			for (uint64_t i = lo + tid; i < hi; i += JUDGE_THREADS)
				kg_judge_stat(&p, &a.c, kg_judge_load(a.got, a.c.dtype, i), kg_judge_bits(a.got, es, i), (int64_t)i);
			continue;
		}
		double f = 1.0;
		if (a.factor) {
			double gx = 0, xx = 0;
			for (uint64_t i = lo + tid; i < hi; i += JUDGE_THREADS) {
				double g = kg_judge_load(a.got, a.c.dtype, i), x = kg_judge_load(a.exp, a.c.dtype, i);
				if (kg_judge_finite(g) && kg_judge_finite(x)) {
					gx += g * x;
					xx += x * x;
				}
			}
			sgx[tid] = gx;
			sxx[tid] = xx;
			__syncthreads();
			for (unsigned s = JUDGE_THREADS / 2; s > 0; s >>= 1) {
				if (tid < s) {
					sgx[tid] += sgx[tid + s];
					sxx[tid] += sxx[tid + s];
				}
				__syncthreads();
			}
			f = kg_judge_factor(sgx[0], sxx[0], a.c.cap);
			__syncthreads();
			double d = f - 1.0 < 0 ? 1.0 - f : f - 1.0;
			if (d > p.factor_max)
				p.factor_max = d;
		}
		for (uint64_t i = lo + tid; i < hi; i += JUDGE_THREADS) {
			kg_judge_elem(&p, kg_judge_load(a.got, a.c.dtype, i), kg_judge_load(a.exp, a.c.dtype, i), (int64_t)i, f,
				      a.c.atol, a.c.rtol);
			uint64_t gb = kg_judge_bits(a.got, es, i);
			p.hash += kg_judge_mix(gb, i);
			if (gb == pw && kg_judge_bits(a.exp, es, i) != pw &&
			    (p.first_unwritten < 0 || (int64_t)i < p.first_unwritten))
				p.first_unwritten = (int64_t)i;
		}
	}
	sh[tid] = p;
	block_merge(sh, tid);
	if (tid == 0)
		a.part[blockIdx.x] = sh[0];
}
