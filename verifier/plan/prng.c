/* ChaCha20 (RFC 8439) as the keyed PRF of every secret value, plus the distributions the input
 * generator needs. Plain C so it is the same everywhere; tests/unit/test_prng.c checks it against
 * the RFC's vectors. */
#include "verifier/plan/prng.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define ROTL32(x, n) (((x) << (n)) | ((x) >> (32 - (n))))
#define QR(a, b, c, d)                                   \
	do {                                             \
		a += b, d ^= a, d = ROTL32(d, 16);       \
		c += d, b ^= c, b = ROTL32(b, 12);       \
		a += b, d ^= a, d = ROTL32(d, 8);        \
		c += d, b ^= c, b = ROTL32(b, 7);        \
	} while (0)

/* ten double rounds (column, then diagonal) with a quarter-round for one lane or several */
#define CHACHA_ROUNDS(Q, x)                                  \
	do {                                                 \
		for (int i_ = 0; i_ < 10; i_++) {            \
			Q(x[0], x[4], x[8], x[12]);          \
			Q(x[1], x[5], x[9], x[13]);          \
			Q(x[2], x[6], x[10], x[14]);         \
			Q(x[3], x[7], x[11], x[15]);         \
			Q(x[0], x[5], x[10], x[15]);         \
			Q(x[1], x[6], x[11], x[12]);         \
			Q(x[2], x[7], x[8], x[13]);          \
			Q(x[3], x[4], x[9], x[14]);          \
		}                                            \
	} while (0)

void kg_chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[16])
{
	const uint32_t in[16] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574, key[0], key[1], key[2], key[3],
				 key[4],     key[5],     key[6],     key[7],     counter, nonce[0], nonce[1], nonce[2]};
	uint32_t x[16];
	memcpy(x, in, sizeof(x));
	CHACHA_ROUNDS(QR, x);
	for (int i = 0; i < 16; i++)
		out[i] = x[i] + in[i];
}

typedef uint32_t v4u __attribute__((vector_size(16)));
#define QR4(a, b, c, d)                                                  \
	do {                                                             \
		a += b, d ^= a, d = (d << 16) | (d >> 16);               \
		c += d, b ^= c, b = (b << 12) | (b >> 20);               \
		a += b, d ^= a, d = (d << 8) | (d >> 24);                \
		c += d, b ^= c, b = (b << 7) | (b >> 25);                \
	} while (0)

void kg_chacha20_block4(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[4][16])
{
	/* word i of the state holds word i of the four blocks, one per lane */
	v4u in[16], x[16];
	static const uint32_t sigma[4] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
	for (int i = 0; i < 4; i++)
		in[i] = (v4u){sigma[i], sigma[i], sigma[i], sigma[i]};
	for (int i = 0; i < 8; i++)
		in[4 + i] = (v4u){key[i], key[i], key[i], key[i]};
	in[12] = (v4u){counter, counter + 1, counter + 2, counter + 3};
	for (int i = 0; i < 3; i++)
		in[13 + i] = (v4u){nonce[i], nonce[i], nonce[i], nonce[i]};
	memcpy(x, in, sizeof(x));
	CHACHA_ROUNDS(QR4, x);
	for (int i = 0; i < 16; i++) {
		v4u w = x[i] + in[i];
		for (int b = 0; b < 4; b++)
			out[b][i] = w[b];
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
typedef uint32_t v8u __attribute__((vector_size(32)));
__attribute__((target("avx2"))) static void block8_avx2(const uint32_t key[8], uint32_t counter,
							 const uint32_t nonce[3], uint32_t out[8][16])
{
	v8u in[16], x[16];
	static const uint32_t sigma[4] = {0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
	for (int i = 0; i < 4; i++)
		in[i] = (v8u){0} + sigma[i];
	for (int i = 0; i < 8; i++)
		in[4 + i] = (v8u){0} + key[i];
	in[12] = (v8u){counter,	    counter + 1, counter + 2, counter + 3,
		       counter + 4, counter + 5, counter + 6, counter + 7};
	for (int i = 0; i < 3; i++)
		in[13 + i] = (v8u){0} + nonce[i];
	memcpy(x, in, sizeof(x));
	CHACHA_ROUNDS(QR4, x);
	for (int i = 0; i < 16; i++) {
		v8u w = x[i] + in[i];
		for (int b = 0; b < 8; b++)
			out[b][i] = w[b];
	}
}
#endif

void kg_chacha20_block8(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[8][16])
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (__builtin_cpu_supports("avx2")) {
		block8_avx2(key, counter, nonce, out);
		return;
	}
#endif
	kg_chacha20_block4(key, counter, nonce, out);
	kg_chacha20_block4(key, counter + 4, nonce, out + 4);
}

void kg_chacha20_bytes(const uint32_t words[16], uint8_t out[64])
{
	for (int i = 0; i < 16; i++)
		for (int b = 0; b < 4; b++)
			out[4 * i + b] = (uint8_t)(words[i] >> (8 * b));
}

void kg_prng_init(kg_prng *r, const kg_key *k, uint32_t n0, uint64_t id)
{
	memcpy(r->key, k->w, sizeof(r->key));
	r->nonce[0] = n0;
	r->nonce[1] = (uint32_t)id;
	r->nonce[2] = (uint32_t)(id >> 32);
	r->counter = 0;
	r->pos = r->len = 0;
}

static void refill(kg_prng *r)
{
	/* 2^32 blocks of 64 bytes per stream: far beyond any tensor's chunk */
	if (!r->len) {
		kg_chacha20_block4(r->key, r->counter, r->nonce, (uint32_t(*)[16])r->buf);
		r->counter += 4;
		r->len = 64;
	} else {
		kg_chacha20_block8(r->key, r->counter, r->nonce, (uint32_t(*)[16])r->buf);
		r->counter += 8;
		r->len = 128;
	}
	r->pos = 0;
}

uint32_t kg_prng_next32(kg_prng *r)
{
	if (r->pos >= r->len)
		refill(r);
	return r->buf[r->pos++];
}

uint64_t kg_prng_next(kg_prng *r)
{
	if (r->pos >= r->len - 1)
		refill(r);
	uint64_t v = (uint64_t)r->buf[r->pos] | (uint64_t)r->buf[r->pos + 1] << 32;
	r->pos += 2;
	return v;
}

double kg_prng_uniform(kg_prng *r)
{
	return (double)(kg_prng_next(r) >> 11) * 0x1.0p-53;
}

/* Normal deviates by the ziggurat (Marsaglia and Tsang 2000, 128 layers): ~99 % of draws cost one
 * 64-bit word, a table look-up and a multiply, where the polar method took a logarithm, a square
 * root and a division (and 1.27 pairs of words) for every two; input generation over gigabyte
 * tensors was a third of the parent's time. The layer comes from bits the value does not use
 * (Doornik 2005: sharing them skews the result). */
#define ZIG_R 3.442619855899
static uint32_t zig_k[128];
static double zig_w[128], zig_f[128];
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void)
{
	const double m = 2147483648.0, v = 9.91256303526217e-3;
	double d = ZIG_R, t = d, q = v / exp(-0.5 * d * d);
	zig_k[0] = (uint32_t)((d / q) * m);
	zig_k[1] = 0;
	zig_w[0] = q / m;
	zig_w[127] = d / m;
	zig_f[0] = 1.0;
	zig_f[127] = exp(-0.5 * d * d);
	for (int i = 126; i >= 1; i--) {
		d = sqrt(-2.0 * log(v / d + exp(-0.5 * d * d)));
		zig_k[i + 1] = (uint32_t)((d / t) * m);
		t = d;
		zig_f[i] = exp(-0.5 * d * d);
		zig_w[i] = d / m;
	}
}

double kg_prng_normal(kg_prng *r)
{
	pthread_once(&zig_once, zig_init);
	for (;;) {
		uint64_t u = kg_prng_next(r);
		int32_t h = (int32_t)(uint32_t)(u >> 32);
		int i = (int)(u & 127);
		uint32_t a = h < 0 ? (uint32_t)0 - (uint32_t)h : (uint32_t)h;
		double x = (double)h * zig_w[i];
		if (a < zig_k[i])
			return x;
		if (i == 0) { /* the tail beyond R */
			double y;
			do {
				x = -log(1.0 - kg_prng_uniform(r)) / ZIG_R;
				y = -log(1.0 - kg_prng_uniform(r));
			} while (y + y < x * x);
			return h > 0 ? ZIG_R + x : -ZIG_R - x;
		}
		if (zig_f[i] + kg_prng_uniform(r) * (zig_f[i - 1] - zig_f[i]) < exp(-0.5 * x * x))
			return x;
	}
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

void kg_key_derive(const kg_key *parent, uint32_t domain, uint64_t id, kg_key *child)
{
	/* The nonce's top bit marks a derivation; streams (kg_prng_init) keep it clear, so a child
	 * key is never also a word of some stream of the same parent. */
	const uint32_t nonce[3] = {domain | 0x80000000u, (uint32_t)id, (uint32_t)(id >> 32)};
	uint32_t blk[16];
	kg_chacha20_block(parent->w, 0, nonce, blk);
	memcpy(child->w, blk, sizeof(child->w));
	memset(blk, 0, sizeof(blk));
}

uint64_t kg_key_u64(const kg_key *k, uint32_t domain, uint64_t id)
{
	kg_prng r;
	kg_prng_init(&r, k, domain, id);
	uint64_t v = kg_prng_next(&r);
	memset(&r, 0, sizeof(r));
	return v;
}

int kg_key_fresh(kg_key *out)
{
	unsigned char b[32];
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	for (int i = 0; i < 8; i++)
		out->w[i] = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
			    (uint32_t)b[4 * i + 3] << 24;
	memset(b, 0, sizeof(b));
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int kg_key_parse(const char *s, kg_key *out)
{
	size_t len = strlen(s);
	if (!len)
		return -EINVAL;
	int hex = len == KG_KEY_HEX_LEN;
	for (size_t i = 0; hex && i < len; i++)
		hex = hexval(s[i]) >= 0;
	if (hex) {
		/* word i is hex digits 8i..8i+7, most significant first, as kg_key_hex prints it */
		for (int i = 0; i < 8; i++) {
			uint32_t w = 0;
			for (int d = 0; d < 8; d++)
				w = w << 4 | (uint32_t)hexval(s[8 * i + d]);
			out->w[i] = w;
		}
		return 0;
	}
	/* Any other string: absorbed 32 bytes at a time into a chained key, its length in the nonce,
	 * so "42" and "042" differ and a short seed still gives a full-width key. */
	kg_key k = {{0}};
	for (size_t off = 0, blkno = 0; off < len; off += 32, blkno++) {
		uint32_t m[8] = {0};
		for (size_t i = 0; i < 32 && off + i < len; i++)
			m[i / 4] |= (uint32_t)(unsigned char)s[off + i] << (8 * (i % 4));
		kg_key x;
		for (int i = 0; i < 8; i++)
			x.w[i] = k.w[i] ^ m[i];
		kg_key_derive(&x, KG_DOM_SEED, (uint64_t)len << 32 | blkno, &k);
	}
	*out = k;
	return 0;
}

void kg_key_hex(const kg_key *k, char out[KG_KEY_HEX_LEN + 1])
{
	for (int i = 0; i < 8; i++)
		snprintf(out + 8 * i, 9, "%08x", k->w[i]);
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
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
