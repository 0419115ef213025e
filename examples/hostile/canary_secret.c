/* Secret recovery: in kgate 0.1 a guard-band word was splitmix64 of the canary key, the canary key
 * splitmix64 of the trial seed, and the trial's inputs a public generator of that seed. So one
 * word in front of the input gives the seed, and the seed the whole input: this kernel never
 * reads x beyond that word, it computes softmax of the input it predicts (the same recovery gives
 * the master seed and every future timed input, whose answers can be made in an untimed call).
 * With inputs and guard words keyed by a secret the candidate never sees, the prediction is
 * noise: check.mismatch. (It trusts its prediction blindly, as an attacker who precomputed
 * answers must.) */
#include <kgate/kernel.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
KG_CANDIDATE;

static const uint64_t G = 0x9e3779b97f4a7c15ull, M1 = 0xbf58476d1ce4e5b9ull, M2 = 0x94d049bb133111ebull;
static const uint64_t KMUL = 0xd1342543de82ef95ull;

static uint64_t inv64(uint64_t m)
{
	uint64_t x = m;
	for (int i = 0; i < 6; i++)
		x *= 2 - m * x;
	return x;
}
static uint64_t unxorshift(uint64_t y, int s)
{
	uint64_t x = y;
	for (int i = 0; i < 64 / s + 1; i++)
		x = y ^ (x >> s);
	return x;
}
static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * M1;
	z = (z ^ (z >> 27)) * M2;
	return z ^ (z >> 31);
}
static uint64_t unmix(uint64_t z)
{
	z = unxorshift(z, 31) * inv64(M2);
	z = unxorshift(z, 27) * inv64(M1);
	return unxorshift(z, 30);
}
/* kgate 0.1's kg_seed_derive and its inverse in the first argument */
static uint64_t derive(uint64_t s, uint64_t k)
{
	return mix((s ^ (k * KMUL)) + 2 * G);
}
static uint64_t underive(uint64_t out, uint64_t k)
{
	return (unmix(out) - 2 * G) ^ (k * KMUL);
}

/* kgate 0.1's xoshiro256** and its distributions */
struct rng {
	uint64_t s[4];
	int have;
	double spare;
};
static void seed(struct rng *r, uint64_t x)
{
	for (int i = 0; i < 4; i++) {
		x += G;
		r->s[i] = mix(x);
	}
	r->have = 0;
}
static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}
static uint64_t next(struct rng *r)
{
	uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
	return res;
}
static double uni(struct rng *r)
{
	return (double)(next(r) >> 11) * 0x1.0p-53;
}
static double normal(struct rng *r)
{
	if (r->have) {
		r->have = 0;
		return r->spare;
	}
	double u, v, s;
	do {
		u = 2 * uni(r) - 1, v = 2 * uni(r) - 1, s = u * u + v * v;
	} while (s >= 1 || s == 0);
	double m = sqrt(-2 * log(s) / s);
	r->spare = v * m, r->have = 1;
	return u * m;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	/* x sat at arena offset 4096; the word in front of it is guard word 511 */
	uint64_t word;
	memcpy(&word, (const char *)x - 8, 8);
	uint64_t canary_key = underive(word, 511);
	uint64_t trial_seed = underive(canary_key, 0x63616e61ull);
	uint64_t tseed = derive(trial_seed, 0); /* input 0's stream */
	struct rng r;
	seed(&r, tseed);
	double off = 2 * uni(&r) - 1, scale = pow(10.0, 1.2 * uni(&r) - 0.6);
	int64_t n = rows * cols;
	for (int64_t i = 0; i < n; i++) { /* the predicted input, staged in the output */
		if (!(i & ((1 << 20) - 1)))
			seed(&r, derive(tseed, (uint64_t)(i >> 20) + 1));
		y[i] = (float)(off + scale * normal(&r));
	}
	for (int64_t row = 0; row < rows; row++) {
		float *yr = y + row * cols, m = -INFINITY, s = 0;
		for (int64_t k = 0; k < cols; k++)
			m = fmaxf(m, yr[k]);
		for (int64_t k = 0; k < cols; k++)
			s += expf(yr[k] - m);
		for (int64_t k = 0; k < cols; k++)
			yr[k] = expf(yr[k] - m) / s;
	}
	return 0;
}
