/* START's staging plan: validation and walk (stage.h). */
#include "device/stage.h"

#include <stdarg.h>
#include <stdio.h>

struct kg_stage_src kg_stage_src_of(const struct kg_stage_book *f, uint32_t sets, uint64_t stride)
{
	int same = sets <= 1 || (f->sets >= sets && f->stride == stride && f->snap_sets >= sets);
	return (struct kg_stage_src){same, f->staged, f->snap_lo, f->snap_hi};
}

static const char *kind_name(uint32_t k)
{
	return k == KG_DEV_R_FILL ? "FILL" : k == KG_DEV_R_GEN ? "GEN" : k == KG_DEV_R_SLOT ? "SLOT" : "unknown";
}

/* 0 after saying why range i (of c) is refused */
static int refused(char *why, size_t whysz, const struct kg_dev_cmd *c, uint32_t i, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int refused(char *why, size_t whysz, const struct kg_dev_cmd *c, uint32_t i, const char *fmt, ...)
{
	if (!why || !whysz)
		return 0;
	const struct kg_dev_range *g = &c->range[i];
	int n = snprintf(why, whysz, "range %u of %u (%s, %llu bytes at %llu, of the call's %llu): ", i, c->n_ranges,
			 kind_name(g->kind), (unsigned long long)g->bytes, (unsigned long long)g->off,
			 (unsigned long long)c->bytes);
	if (n > 0 && (size_t)n < whysz) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why + n, whysz - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return 0;
}

int kg_stage_valid(const struct kg_dev_cmd *c, const struct kg_stage_src *src, char *why, size_t whysz)
{
	if (c->n_ranges > KG_DEV_MAX_RANGES) {
		if (why && whysz)
			snprintf(why, whysz, "%u ranges (at most %d)", c->n_ranges, KG_DEV_MAX_RANGES);
		return 0;
	}
	uint64_t end = 0;
	for (uint32_t i = 0; i < c->n_ranges; i++) {
		const struct kg_dev_range *g = &c->range[i];
		if (!g->bytes || g->off < end || g->bytes > c->bytes || g->off > c->bytes - g->bytes)
			return refused(why, whysz, c, i, "empty, before the end of the one before it (%llu) or past the call's bytes",
				       (unsigned long long)end);
		end = g->off + g->bytes;
		if (g->kind == KG_DEV_R_FILL) {
			if ((g->elem != 1 && g->elem != 2 && g->elem != 4 && g->elem != 8) || g->bytes % g->elem ||
			    g->off % (g->elem < 4 ? g->elem : 4))
				return refused(why, whysz, c, i, "not whole elements of %u bytes on an aligned offset", g->elem);
		} else if (g->kind == KG_DEV_R_GEN) {
			/* a draw the core can make, exactly the range's bytes, elements aligned */
			if (!kg_gen_valid(&g->gen, g->bytes) || g->off % kg_gen_dtype_size(g->gen.dtype))
				return refused(why, whysz, c, i,
					       "not a draw of exactly its bytes on an aligned offset (%llu elements of dtype %u, "
					       "kind %u)",
					       (unsigned long long)g->gen.n, g->gen.dtype, g->gen.kind);
		} else if (g->kind == KG_DEV_R_SLOT) {
			if (!src || !src->usable)
				return refused(why, whysz, c, i, "no source slot %u to read (none attached, itself, or its "
								"last START not a batch of these sets)",
					       c->src_slot);
			if (end > src->staged || (g->off < src->snap_hi && end > src->snap_lo))
				return refused(why, whysz, c, i,
					       "past what source slot %u staged (%llu bytes) or inside its outputs' snapshot "
					       "[%llu, %llu)",
					       c->src_slot, (unsigned long long)src->staged, (unsigned long long)src->snap_lo,
					       (unsigned long long)src->snap_hi);
		} else {
			return refused(why, whysz, c, i, "an unknown kind %u", g->kind);
		}
	}
	return 1;
}

int kg_stage_walk(const struct kg_dev_cmd *c, int (*host)(void *arg, uint64_t off, uint64_t n),
		  int (*range)(void *arg, const struct kg_dev_range *g), void *arg)
{
	uint64_t at = 0;
	for (uint32_t i = 0; i <= c->n_ranges && i <= KG_DEV_MAX_RANGES; i++) {
		int last = i == c->n_ranges || i == KG_DEV_MAX_RANGES;
		uint64_t to = last ? c->bytes : c->range[i].off;
		int rc;
		if (to > at && (rc = host(arg, at, to - at)))
			return rc;
		if (last)
			break;
		if ((rc = range(arg, &c->range[i])))
			return rc;
		at = c->range[i].off + c->range[i].bytes;
	}
	return 0;
}

int kg_stage_gate_valid(const struct kg_dev_cmd *c, int has_gate, uint32_t sets)
{
	if (!has_gate || !sets || sets > KG_DEV_MAX_GATED_SETS || c->out_lo > c->out_hi || c->out_hi > c->bytes)
		return 0;
	uint64_t total = 0;
	for (int i = 0; i < 2; i++) {
		uint64_t o = c->probe_off[i], b = c->probe_bytes[i];
		if (!b)
			continue;
		if (!c->probe_ns || sets > 1 || o % 8 || b % 8 || b > c->bytes || o > c->bytes - b ||
		    (o < c->out_hi && o + b > c->out_lo))
			return 0;
		total += b;
	}
	return total <= KG_DEV_PROBE_MAX;
}

uint32_t kg_stage_gate_verdict(uint32_t armed, uint32_t done, uint32_t tok, uint32_t sets, uint32_t *set)
{
	*set = 0;
	if ((int32_t)(armed - tok) < 0)
		return KG_DEV_GATE_NO_ARM;
	int32_t d = (int32_t)(done - tok);
	if (d >= (int32_t)sets - 1)
		return KG_DEV_GATE_OK; /* every mark came: the snapshot was still under way */
	*set = d >= 0 ? (uint32_t)d + 1 : 0;
	return KG_DEV_GATE_NO_DONE;
}
