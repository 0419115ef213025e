/* The runner's reading of the tensor tables (runner/wire.h): the parent's file, copied into the
 * runner at start, is data like any other here, so every count, offset and shape is checked before
 * one of them becomes a pointer the candidate is handed. Pure functions (the unit tests call them
 * on forged tables). */
#include <stdio.h>
#include <string.h>

#include "runner/wire.h"

uint64_t kg_wire_dtype_size(int32_t dt)
{
	static const uint64_t size[] = {[KG_F32] = 4, [KG_F16] = 2, [KG_BF16] = 2, [KG_I32] = 4,
					[KG_I64] = 8, [KG_U8] = 1,  [KG_BOOL] = 1};
	return dt >= 0 && dt <= KG_BOOL ? size[dt] : 0;
}

/* The tensor's bytes, or UINT64_MAX where its shape is not one (a negative dim, a rank out of
 * range, an unknown dtype) or its size passes limit. */
static uint64_t tensor_bytes(const struct kg_wire_tensor *w, uint64_t limit)
{
	uint64_t es = kg_wire_dtype_size(w->dtype), n = 1;
	if (!es || w->ndim < 0 || w->ndim > KG_MAX_DIMS)
		return UINT64_MAX;
	for (int d = 0; d < w->ndim; d++) {
		if (w->shape[d] < 0)
			return UINT64_MAX;
		uint64_t k = (uint64_t)w->shape[d];
		if (k && n > limit / k)
			return UINT64_MAX;
		n *= k;
	}
	return n > limit / es ? UINT64_MAX : n * es;
}

int kg_wire_table_get(const void *buf, size_t len, uint32_t idx, uint32_t n_in, uint32_t n_out, uint64_t arena_size,
		      const struct kg_wire_tensor **t, char *err, size_t errsz)
{
	const unsigned char *b = buf;
	struct kg_wire_tables h;
	struct kg_wire_table th;
	*t = NULL;
	if (!b || len < sizeof(h)) {
		snprintf(err, errsz, "no tensor tables");
		return -1;
	}
	memcpy(&h, b, sizeof(h));
	if (h.magic != KG_WIRE_MAGIC || h.count > (len - sizeof(h)) / sizeof(th)) {
		snprintf(err, errsz, "the tensor tables' header is not one (%u tables in %zu bytes)", h.count, len);
		return -1;
	}
	if (idx >= h.count) {
		snprintf(err, errsz, "SETUP names table %u of %u", idx, h.count);
		return -1;
	}
	memcpy(&th, b + sizeof(h) + (size_t)idx * sizeof(th), sizeof(th));
	uint64_t n = (uint64_t)th.n_in + th.n_out;
	if (th.n_in != n_in || th.n_out != n_out) {
		snprintf(err, errsz, "table %u holds %u inputs and %u outputs, SETUP says %u and %u", idx, th.n_in,
			 th.n_out, n_in, n_out);
		return -1;
	}
	if (th.at % 8 || th.at > len || n > (len - th.at) / sizeof(struct kg_wire_tensor)) {
		snprintf(err, errsz, "table %u's %llu tensors at byte %llu lie outside the file's %zu bytes", idx,
			 (unsigned long long)n, (unsigned long long)th.at, len);
		return -1;
	}
	const struct kg_wire_tensor *w = (const struct kg_wire_tensor *)(const void *)(b + th.at);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t bytes = tensor_bytes(&w[i], arena_size);
		if (bytes == UINT64_MAX || w[i].offset > arena_size || bytes > arena_size - w[i].offset) {
			snprintf(err, errsz, "table %u: tensor %llu (rank %d, dtype %d, at %llu) does not fit the arena's "
				 "%llu bytes", idx, (unsigned long long)i, w[i].ndim, w[i].dtype,
				 (unsigned long long)w[i].offset, (unsigned long long)arena_size);
			return -1;
		}
	}
	*t = w;
	return 0;
}
