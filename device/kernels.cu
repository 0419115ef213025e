/* kgate-device's own kernels, built by nvcc into a fatbin that kgate-device embeds (device/
 * module.mk; without nvcc it has none, and kgate stages everything from the host as before). They
 * run in the keeper's context on its private memory: no candidate's context ever sees them.
 * kg_gen_fill draws a tensor with the generator's core (common/kg_gen.h, the same source as the
 * host's, compiled with -fmad=false: the same bits); kg_first_diff finds the first 8-byte word in
 * which two buffers differ (the candidate's inputs against the pristine copy). */
#include <stdint.h>

#include "kg_gen.h"

struct kg_gen_args {
	struct kg_gen_tensor t;
	uint32_t key[8];
	const struct kg_gen_zig *z;
	void *dst;
};

/* one thread a group of eight elements (one ChaCha block), grid-strided */
extern "C" __global__ void kg_gen_fill(struct kg_gen_args a)
{
	uint32_t key[8];
	for (int i = 0; i < 8; i++)
		key[i] = a.key[i];
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
