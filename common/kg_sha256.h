/* SHA-256 (FIPS 180-4), one-shot and streaming. Content addressing wherever kgate must resist a
 * crafted collision: candidates in a search (a verdict is reused only for the exact same source)
 * and the compile cache's keys and entry digests (verifier/compile/cache.h). */
#ifndef KG_SHA256_H
#define KG_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct kg_sha256_ctx {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	uint8_t buf[64];
	size_t n; /* bytes waiting in buf */
} kg_sha256_ctx;

void kg_sha256_init(kg_sha256_ctx *c);
void kg_sha256_update(kg_sha256_ctx *c, const void *data, size_t len);
/* Writes the digest; the context must be initialised again before reuse. */
void kg_sha256_final(kg_sha256_ctx *c, uint8_t out[32]);

void kg_sha256(const void *data, size_t len, uint8_t out[32]);
/* 64 lower-case hex digits and a NUL. */
void kg_sha256_hex(const void *data, size_t len, char out[65]);
void kg_sha256_tohex(const uint8_t d[32], char out[65]);

#endif
