/* The element-wise judgement of an output (verifier/judge/compare.c's rules: the bound atol + rtol*|exp|,
 * NaN and Inf explicit, a row's common factor fitted first under factor: row) and the reference's
 * statistics (finite sum and sum of squares, poison, distance from constants), as functions one
 * source compiles for the host (the tests, and CI's fake keeper) and for the device (kgate-device's
 * kg_judge kernels, device/kernels.cu). Partial results merge in any order to the same maxima and
 * first indices (the greatest value, the lowest index among equal ones, as the host's in-order
 * scan picks); only the sums' last bits depend on the order. */
#ifndef KG_DEVICE_JUDGE_H
#define KG_DEVICE_JUDGE_H

#include <stdint.h>

#include "kg_gen.h"
#include "device/wire.h"

KG_GEN_FN int kg_judge_isnan(double x)
{
	return x != x;
}

KG_GEN_FN int kg_judge_isinf(double x)
{
	return x == kg_gen_bits_double(0x7ff0000000000000ull) || x == -kg_gen_bits_double(0x7ff0000000000000ull);
}

KG_GEN_FN int kg_judge_finite(double x)
{
	return !kg_judge_isnan(x) && !kg_judge_isinf(x);
}

KG_GEN_FN double kg_judge_inf(void)
{
	return kg_gen_bits_double(0x7ff0000000000000ull);
}

/* element i of a tensor of dtype dt at p, as a double (verifier/plan/dtype.h's kg_load) */
KG_GEN_FN double kg_judge_load(const void *p, uint32_t dt, uint64_t i)
{
	union {
		uint32_t u;
		float f;
	} x;
	switch (dt) {
	case KG_GEN_F32:
		return ((const float *)p)[i];
	case KG_GEN_F16:
		return kg_gen_from_f16(((const uint16_t *)p)[i]);
	case KG_GEN_BF16:
		x.u = (uint32_t)((const uint16_t *)p)[i] << 16;
		return x.f;
	case KG_GEN_I32:
		return ((const int32_t *)p)[i];
	case KG_GEN_I64:
		return (double)((const int64_t *)p)[i];
	case KG_GEN_U8:
	case KG_GEN_BOOL: /* its byte as it is: a true stored as 2 is not 1 */
		return ((const uint8_t *)p)[i];
	default:
		return kg_gen_bits_double(0x7ff8000000000000ull);
	}
}

/* element i's bits, as the poison is compared (words of the element's size) */
KG_GEN_FN uint64_t kg_judge_bits(const void *p, unsigned es, uint64_t i)
{
	switch (es) {
	case 1:
		return ((const uint8_t *)p)[i];
	case 2:
		return ((const uint16_t *)p)[i];
	case 4:
		return ((const uint32_t *)p)[i];
	default:
		return ((const uint64_t *)p)[i];
	}
}

KG_GEN_FN uint64_t kg_judge_poison_word(uint64_t poison, unsigned es)
{
	return es >= 8 ? poison : poison & ((1ull << (8 * es)) - 1);
}

/* Element i's share of an output's hash: its bits mixed with its index (splitmix64's finaliser), so
 * that a sum over the elements in any order tells contents apart as an ordered hash does. */
KG_GEN_FN uint64_t kg_judge_mix(uint64_t bits, uint64_t i)
{
	uint64_t z = bits ^ (i * 0x9e3779b97f4a7c15ull) ^ 0x6a09e667f3bcc909ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

KG_GEN_FN void kg_judge_init(struct kg_dev_cmp *p)
{
	/* every field 0, then the indices -1 */
	unsigned char *b = (unsigned char *)p;
	for (unsigned k = 0; k < sizeof(*p); k++)
		b[k] = 0;
	p->first_bad = p->first_nan = p->max_abs_idx = p->max_rel_idx = p->tol_used_idx = -1;
	p->first_unwritten = p->first_poison = -1;
}

/* (v, i) replaces (best, at) when greater, or equal at a lower index, or when there is none yet */
KG_GEN_FN int kg_judge_better(double v, int64_t i, double best, int64_t at)
{
	return at < 0 || v > best || (v == best && i < at);
}

/* One element of a COMPARE: got g, expected x, the row's factor c (1 without factor: row). */
KG_GEN_FN void kg_judge_elem(struct kg_dev_cmp *p, double g, double x, int64_t i, double c, double atol, double rtol)
{
	int bad;
	double abs_err = 0, rel_err = 0, used = 0, inf = kg_judge_inf();
	p->n++;
	if (kg_judge_isnan(x)) {
		bad = !kg_judge_isnan(g);
		if (bad)
			abs_err = rel_err = inf;
	} else if (kg_judge_isnan(g)) {
		bad = 1;
		p->n_nan++;
		if (p->first_nan < 0 || i < p->first_nan)
			p->first_nan = i;
		abs_err = rel_err = inf;
	} else if (kg_judge_isinf(x) || kg_judge_isinf(g)) {
		bad = g != x;
		if (bad) {
			p->n_inf++;
			abs_err = rel_err = inf;
		}
	} else {
		double ax = x < 0 ? -x : x, bound = atol + rtol * ax, raw = g - x;
		abs_err = g - c * x;
		abs_err = abs_err < 0 ? -abs_err : abs_err;
		raw = raw < 0 ? -raw : raw;
		rel_err = abs_err / (ax > 1e-30 ? ax : 1e-30);
		bad = !(abs_err <= bound);
		used = bound > 0 ? abs_err / bound : abs_err > 0 ? inf : 0;
		p->err_sq += raw * raw;
		p->res_sq += abs_err * abs_err;
		p->ref_sq += x * x;
	}
	if (bad && !(used > 1)) { /* a non-finite mismatch: no norm-wise error can be small */
		used = inf;
		p->err_sq = p->res_sq = inf;
	}
	if (kg_judge_better(used, i, p->tol_used, p->tol_used_idx)) {
		p->tol_used = used;
		p->tol_used_idx = i;
	}
	if (bad) {
		if (p->first_bad < 0 || i < p->first_bad) {
			p->first_bad = i;
			p->first_bad_got = g;
			p->first_bad_exp = x;
		}
		p->n_bad++;
	}
	if (kg_judge_better(abs_err, i, p->max_abs_err, p->max_abs_idx)) {
		p->max_abs_err = abs_err;
		p->max_abs_idx = i;
		p->max_abs_got = g;
		p->max_abs_exp = x;
	}
	if (kg_judge_better(rel_err, i, p->max_rel_err, p->max_rel_idx)) {
		p->max_rel_err = rel_err;
		p->max_rel_idx = i;
	}
}

/* One element of a STATS pass over the reference. */
KG_GEN_FN void kg_judge_stat(struct kg_dev_cmp *p, const struct kg_dev_check *c, double x, uint64_t bits, int64_t i)
{
	p->n++;
	if (bits == kg_judge_poison_word(c->poison, kg_gen_dtype_size(c->dtype)) && (p->first_poison < 0 || i < p->first_poison))
		p->first_poison = i;
	int fin = kg_judge_finite(x);
	if (fin) {
		p->sum += x;
		p->sum_sq += x * x;
		p->n_finite++;
	}
	for (int k = 0; k < 2 && c->near; k++) {
		double d = c->c[k] - x, ax = x < 0 ? -x : x;
		d = d < 0 ? -d : d;
		if (!(fin && d <= c->atol + c->rtol * ax))
			p->far[k]++;
	}
}

/* An output's hash as COMPARE gives it (kg_judge_mix of each element's bits, summed), on the host:
 * for a call the device did not judge, so that every call of a run is hashed alike. */
KG_GEN_FN uint64_t kg_judge_hash(const void *p, uint32_t dt, uint64_t n)
{
	unsigned es = kg_gen_dtype_size(dt);
	uint64_t h = 0;
	for (uint64_t i = 0; i < n; i++)
		h += kg_judge_mix(kg_judge_bits(p, es, i), i);
	return h;
}

/* b folded into a: counts and sums added, maxima and first indices kept as one scan would. */
KG_GEN_FN void kg_judge_merge(struct kg_dev_cmp *a, const struct kg_dev_cmp *b)
{
	a->n += b->n;
	a->n_bad += b->n_bad;
	a->n_nan += b->n_nan;
	a->n_inf += b->n_inf;
	if (b->first_bad >= 0 && (a->first_bad < 0 || b->first_bad < a->first_bad)) {
		a->first_bad = b->first_bad;
		a->first_bad_got = b->first_bad_got;
		a->first_bad_exp = b->first_bad_exp;
	}
	if (b->first_nan >= 0 && (a->first_nan < 0 || b->first_nan < a->first_nan))
		a->first_nan = b->first_nan;
	if (b->first_unwritten >= 0 && (a->first_unwritten < 0 || b->first_unwritten < a->first_unwritten))
		a->first_unwritten = b->first_unwritten;
	if (b->first_poison >= 0 && (a->first_poison < 0 || b->first_poison < a->first_poison))
		a->first_poison = b->first_poison;
	if (b->max_abs_idx >= 0 && kg_judge_better(b->max_abs_err, b->max_abs_idx, a->max_abs_err, a->max_abs_idx)) {
		a->max_abs_err = b->max_abs_err;
		a->max_abs_idx = b->max_abs_idx;
		a->max_abs_got = b->max_abs_got;
		a->max_abs_exp = b->max_abs_exp;
	}
	if (b->max_rel_idx >= 0 && kg_judge_better(b->max_rel_err, b->max_rel_idx, a->max_rel_err, a->max_rel_idx)) {
		a->max_rel_err = b->max_rel_err;
		a->max_rel_idx = b->max_rel_idx;
	}
	if (b->tol_used_idx >= 0 && kg_judge_better(b->tol_used, b->tol_used_idx, a->tol_used, a->tol_used_idx)) {
		a->tol_used = b->tol_used;
		a->tol_used_idx = b->tol_used_idx;
	}
	a->err_sq += b->err_sq;
	a->res_sq += b->res_sq;
	a->ref_sq += b->ref_sq;
	a->factor_max = a->factor_max > b->factor_max ? a->factor_max : b->factor_max;
	a->sum += b->sum;
	a->sum_sq += b->sum_sq;
	a->n_finite += b->n_finite;
	a->far[0] += b->far[0];
	a->far[1] += b->far[1];
	a->hash += b->hash;
}

/* A row's factor from its sums over the pairs finite on both sides (compare.c's row_factor_t). */
KG_GEN_FN double kg_judge_factor(double gx, double xx, double cap)
{
	double c = xx > 0 ? gx / xx : 1.0;
	if (!kg_judge_finite(c))
		return 1.0;
	return c < 1.0 - cap ? 1.0 - cap : c > 1.0 + cap ? 1.0 + cap : c;
}

/* 1 when c is a check the device can make: a known mode and dtype, rows that divide n. */
KG_GEN_FN int kg_judge_valid(const struct kg_dev_check *c)
{
	if (!kg_gen_dtype_size(c->dtype) || (c->mode != KG_DEV_CHK_COMPARE && c->mode != KG_DEV_CHK_STATS) ||
	    c->n > (UINT64_MAX >> 4))
		return 0;
	return !c->row || (c->mode == KG_DEV_CHK_COMPARE && c->n % c->row == 0);
}

/* The whole of one check on the host, elements in order (CI's fake keeper, the tests): what the
 * device's kernels compute in parallel. got: the candidate's output (COMPARE) or the reference's
 * (STATS); exp: the reference's (COMPARE). */
KG_GEN_FN void kg_judge_host(const struct kg_dev_check *c, const void *got, const void *exp, struct kg_dev_cmp *out)
{
	unsigned es = kg_gen_dtype_size(c->dtype);
	uint64_t pw = kg_judge_poison_word(c->poison, es);
	kg_judge_init(out);
	if (c->mode == KG_DEV_CHK_STATS) {
		for (uint64_t i = 0; i < c->n; i++)
			kg_judge_stat(out, c, kg_judge_load(got, c->dtype, i), kg_judge_bits(got, es, i), (int64_t)i);
		return;
	}
	int rows = c->row && !kg_gen_is_int(c->dtype);
	uint64_t len = rows ? c->row : c->n ? c->n : 1;
	for (uint64_t a = 0; a < c->n; a += len) {
		uint64_t b = a + len < c->n ? a + len : c->n;
		double f = 1.0;
		if (rows) {
			double gx = 0, xx = 0;
			for (uint64_t i = a; i < b; i++) {
				double g = kg_judge_load(got, c->dtype, i), x = kg_judge_load(exp, c->dtype, i);
				if (kg_judge_finite(g) && kg_judge_finite(x)) {
					gx += g * x;
					xx += x * x;
				}
			}
			f = kg_judge_factor(gx, xx, c->cap);
			double d = f - 1.0 < 0 ? 1.0 - f : f - 1.0;
			out->factor_max = out->factor_max > d ? out->factor_max : d;
		}
		for (uint64_t i = a; i < b; i++) {
			kg_judge_elem(out, kg_judge_load(got, c->dtype, i), kg_judge_load(exp, c->dtype, i), (int64_t)i, f,
				      c->atol, c->rtol);
			uint64_t gb = kg_judge_bits(got, es, i);
			out->hash += kg_judge_mix(gb, i);
			if (gb == pw && kg_judge_bits(exp, es, i) != pw &&
			    (out->first_unwritten < 0 || (int64_t)i < out->first_unwritten))
				out->first_unwritten = (int64_t)i;
		}
	}
}

#endif
