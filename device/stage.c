/* START's staging plan: validation and walk (stage.h). */
#include "device/stage.h"

int kg_stage_valid(const struct kg_dev_cmd *c, const struct kg_stage_src *src)
{
	if (c->n_ranges > KG_DEV_MAX_RANGES)
		return 0;
	uint64_t end = 0;
	for (uint32_t i = 0; i < c->n_ranges; i++) {
		const struct kg_dev_range *g = &c->range[i];
		if (!g->bytes || g->off < end || g->bytes > c->bytes || g->off > c->bytes - g->bytes)
			return 0;
		end = g->off + g->bytes;
		if (g->kind == KG_DEV_R_FILL) {
			if ((g->elem != 1 && g->elem != 2 && g->elem != 4 && g->elem != 8) || g->bytes % g->elem ||
			    g->off % (g->elem < 4 ? g->elem : 4))
				return 0;
		} else if (g->kind == KG_DEV_R_GEN) {
			/* a draw the core can make, exactly the range's bytes, elements aligned */
			if (!kg_gen_valid(&g->gen, g->bytes) || g->off % kg_gen_dtype_size(g->gen.dtype))
				return 0;
		} else if (g->kind == KG_DEV_R_SLOT) {
			if (!src || !src->usable || end > src->staged || (g->off < src->snap_hi && end > src->snap_lo))
				return 0;
		} else {
			return 0;
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
