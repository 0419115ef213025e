/* Seeded pseudo-random numbers for input generation: xoshiro256** seeded through splitmix64.
 * Reproducible from the 64-bit seed recorded in the report; the seed itself comes from getrandom
 * and stays in the parent. */
#ifndef KG_PRNG_H
#define KG_PRNG_H

#include <stdint.h>

typedef struct kg_prng {
	uint64_t s[4];
	int have_spare;
	double spare;
} kg_prng;

void kg_prng_seed(kg_prng *r, uint64_t seed);
uint64_t kg_prng_next(kg_prng *r);
/* Uniform in [0, 1) with 53 random bits. */
double kg_prng_uniform(kg_prng *r);
/* Standard normal (Marsaglia polar method). */
double kg_prng_normal(kg_prng *r);
/* Uniform integer in [0, n); n > 0. Unbiased (rejection). */
uint64_t kg_prng_below(kg_prng *r, uint64_t n);
/* Derives the seed of sub-stream `k` of `seed`, so trials and tensors get independent streams. */
uint64_t kg_seed_derive(uint64_t seed, uint64_t k);
/* A fresh 64-bit seed from getrandom(2); 0 on success. */
int kg_seed_fresh(uint64_t *out);

#endif
