/* xoshiro256** (Blackman and Vigna) with splitmix64 seeding, plus the distributions the input
 * generator needs. Chosen for speed over gigabyte inputs and exact reproducibility. */
#include "verifier/prng.h"

#include <errno.h>
#include <math.h>
#include <sys/random.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void kg_prng_seed(kg_prng *r, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
	r->have_spare = 0;
	r->spare = 0;
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t kg_prng_next(kg_prng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double kg_prng_uniform(kg_prng *r)
{
	return (double)(kg_prng_next(r) >> 11) * 0x1.0p-53;
}

double kg_prng_normal(kg_prng *r)
{
	if (r->have_spare) {
		r->have_spare = 0;
		return r->spare;
	}
	double u, v, s;
	do {
		u = 2.0 * kg_prng_uniform(r) - 1.0;
		v = 2.0 * kg_prng_uniform(r) - 1.0;
		s = u * u + v * v;
	} while (s >= 1.0 || s == 0.0);
	double m = sqrt(-2.0 * log(s) / s);
	r->spare = v * m;
	r->have_spare = 1;
	return u * m;
}

uint64_t kg_prng_below(kg_prng *r, uint64_t n)
{
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = kg_prng_next(r);
	while (x >= limit);
	return x % n;
}

uint64_t kg_seed_derive(uint64_t seed, uint64_t k)
{
	uint64_t x = seed ^ (k * 0xd1342543de82ef95ull);
	splitmix64(&x);
	return splitmix64(&x);
}

int kg_seed_fresh(uint64_t *out)
{
	uint64_t v;
	ssize_t n;
	do
		n = getrandom(&v, sizeof(v), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(v))
		return n < 0 ? -errno : -EIO;
	*out = v;
	return 0;
}
