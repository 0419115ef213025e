/* Keyed pseudo-random streams: ChaCha20 (RFC 8439) under a 256-bit secret drawn from getrandom.
 * Every value the candidate can see (inputs, canary and poison words, shapes) is keystream of a
 * key derived from the master secret, so seeing any of it reveals neither the key nor any other. */
#ifndef KG_PRNG_H
#define KG_PRNG_H

#include <stddef.h>
#include <stdint.h>

/* A 256-bit ChaCha20 key. */
typedef struct kg_key {
	uint32_t w[8];
} kg_key;

#define KG_KEY_HEX_LEN 64

/* One ChaCha20 block (RFC 8439 section 2.3): 16 little-endian output words. */
void kg_chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[16]);
/* Serialises a block's words as the RFC's 64 output bytes. */
void kg_chacha20_bytes(const uint32_t words[16], uint8_t out[64]);

/* Four consecutive blocks (counter .. counter+3) at once, lanes in parallel: the same bytes as four
 * calls of kg_chacha20_block, several times faster (gigabyte inputs are keystream). */
void kg_chacha20_block4(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[4][16]);
/* Eight consecutive blocks: two block4 calls, or one pass over AVX2's eight lanes where the CPU has
 * them (the same words either way). */
void kg_chacha20_block8(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[8][16]);

/* A keystream: ChaCha20 under key with the nonce (n0, id), block counter from 0. Distinct
 * (n0, id) pairs under one key are independent streams; n0 < 2^31 (the top bit is derivation's). */
typedef struct kg_prng {
	uint32_t key[8];
	uint32_t nonce[3];
	uint32_t counter;
	uint32_t buf[128];
	int pos; /* next unused word of buf */
	int len; /* words in buf: 0 before the first refill, which makes 4 blocks (a stream read for a
		  * word or two costs no more), then 8 a time */
} kg_prng;

void kg_prng_init(kg_prng *r, const kg_key *k, uint32_t n0, uint64_t id);
uint64_t kg_prng_next(kg_prng *r);
/* The next 32 bits of the stream. */
uint32_t kg_prng_next32(kg_prng *r);
/* Uniform in [0, 1) with 53 random bits. */
double kg_prng_uniform(kg_prng *r);
/* Standard normal (Marsaglia polar method on 32-bit uniforms: ample for fp32 data, half the
 * keystream). */
double kg_prng_normal(kg_prng *r);
/* Uniform integer in [0, n); n > 0. Unbiased (rejection). */
uint64_t kg_prng_below(kg_prng *r, uint64_t n);

/* Domains: the nonce word that separates the uses of one key. A child key is a ChaCha20 block of
 * its parent under (domain with the top bit set, id): children of distinct (domain, id) are
 * independent of each other and of every stream. */
enum kg_key_domain {
	KG_DOM_INPUTS = 0x696e7075, /* "inpu": input streams */
	KG_DOM_CANARY = 0x63616e61, /* "cana": guard-band words */
	KG_DOM_POISON = 0x706f6973, /* "pois": unwritten-output patterns */
	KG_DOM_SHAPES = 0x73686170, /* "shap": secret random shapes */
	KG_DOM_IDS = 0x69647321, /* "ids!": the public id base of trials */
	KG_DOM_SEED = 0x73656564, /* "seed": a key from a user's --seed string */
};
void kg_key_derive(const kg_key *parent, uint32_t domain, uint64_t id, kg_key *child);
/* One 64-bit word of the stream (domain, id): a PRF output. */
uint64_t kg_key_u64(const kg_key *k, uint32_t domain, uint64_t id);
/* A fresh key from getrandom(2); 0 or -errno. */
int kg_key_fresh(kg_key *out);
/* 64 hex digits are a key as printed by kg_key_hex; any other non-empty string (a short number
 * from an old report, a word) is hashed into a key under the "seed" domain. 0 or -EINVAL. */
int kg_key_parse(const char *s, kg_key *out);
/* The key as 64 lower-case hex digits and a NUL. */
void kg_key_hex(const kg_key *k, char out[KG_KEY_HEX_LEN + 1]);

/* Public id mixing (splitmix64): trial ids and sub-ids. Not secret and not meant to be: what a
 * trial's data is depends on the secret key, the id only tells trials apart. */
uint64_t kg_seed_derive(uint64_t seed, uint64_t k);
/* A fresh 64-bit value from getrandom(2); 0 on success. */
int kg_seed_fresh(uint64_t *out);

#endif
