/* SHA-256, for content-addressing candidates: a candidate's verdict is reused only for the exact
 * same source, so the hash must resist a model (or a hostile agent) crafting a collision. */
#ifndef KG_SHA256_H
#define KG_SHA256_H

#include <stddef.h>
#include <stdint.h>

void kg_sha256(const void *data, size_t len, uint8_t out[32]);
/* 64 lower-case hex digits and a NUL. */
void kg_sha256_hex(const void *data, size_t len, char out[65]);

#endif
