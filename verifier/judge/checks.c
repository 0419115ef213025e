/* The pure checks (checks.h). Messages say what a reviewer needs (which tensor, which element,
 * expected and got); the caller adds the trial's class, seed and shape. */
#include "verifier/judge/checks.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "verifier/judge/compare.h"
#include "verifier/plan/dtype.h"
#include "verifier/plan/parallel.h"

struct kg_finding *kg_findings_add(struct kg_findings *out, enum kg_reason_code code, int slot, const char *fmt, ...)
{
	/* A full list keeps its last slot for the newest finding: a rejection is never lost. */
	struct kg_finding *f = &out->f[out->n < KG_MAX_FINDINGS ? out->n++ : KG_MAX_FINDINGS - 1];
	memset(f, 0, sizeof(*f));
	f->code = code;
	f->slot = slot;
	f->index = -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
	return f;
}

static const char *name_of(const struct kg_view *v, int slot)
{
	return v->names && slot >= 0 && v->names[slot] ? v->names[slot] : "?";
}

static void set_values(struct kg_finding *f, int64_t index, double expected, double got)
{
	f->index = index;
	f->has_values = 1;
	f->expected = expected;
	f->got = got;
}

int kg_check_canaries(const struct kg_view *v, struct kg_findings *out)
{
	int slot, side;
	uint64_t dist;
	if (!kg_arena_canary_check(v->arena, &slot, &side, &dist))
		return 0;
	struct kg_finding *f = kg_findings_add(out, KG_R_CHECK_CANARY, slot, "guard band %s '%s' overwritten, %llu bytes %s its %s",
				   side < 0 ? "before" : "after", name_of(v, slot), (unsigned long long)dist,
				   side < 0 ? "before" : "past", side < 0 ? "start" : "end");
	f->index = (int64_t)dist;
	return 1;
}

struct differ_job {
	const unsigned char *a, *b;
	int differs[KG_PAR_MAX_PARTS];
};

static void differ_part(void *arg, int part, size_t lo, size_t hi)
{
	struct differ_job *j = arg;
	j->differs[part] = memcmp(j->a + lo, j->b + lo, hi - lo) != 0;
}

/* memcmp on every core: an input of a gigabyte is compared after every call */
static int bytes_differ(const void *a, const void *b, size_t n)
{
	struct differ_job j = {.a = a, .b = b};
	int parts = kg_parallel_for(n, 4u << 20, differ_part, &j);
	for (int i = 0; i < parts; i++)
		if (j.differs[i])
			return 1;
	return 0;
}

int kg_check_inputs(const struct kg_view *v, struct kg_findings *out)
{
	int n = 0;
	for (int i = 0; i < v->arena->n_in && !v->inputs_same; i++) {
		const struct kg_arena_slot *s = &v->arena->slot[i];
		const unsigned char *got = kg_arena_ptr(v->arena, i), *want = v->shadow[i];
		if (!bytes_differ(got, want, s->bytes))
			continue;
		size_t es = kg_dtype_size(s->dtype), k = 0;
		while (k < s->bytes && got[k] == want[k])
			k++;
		struct kg_finding *f = kg_findings_add(out, KG_R_CHECK_INPUT_MODIFIED, i, "input '%s' was modified", name_of(v, i));
		set_values(f, (int64_t)(k / es), kg_load(want, s->dtype, k / es), kg_load(got, s->dtype, k / es));
		n++;
	}
	return n;
}

int kg_check_unwritten(const struct kg_view *v, struct kg_findings *out)
{
	int n = 0;
	const struct kg_arena *a = v->arena;
	for (int j = 0; j < a->n_out && !v->outputs_judged; j++) {
		int s = a->n_in + j;
		int64_t idx = kg_arena_unwritten(a, s, v->ref ? v->ref[j] : NULL);
		if (idx < 0)
			continue;
		struct kg_finding *f = kg_findings_add(out, KG_R_CHECK_UNWRITTEN_OUTPUT, s,
					   "output '%s' was not written (first unwritten element shown)", name_of(v, s));
		f->index = idx;
		n++;
	}
	return n;
}

int kg_check_outputs(const struct kg_view *v, enum kg_reason_code code, struct kg_findings *out)
{
	int n = 0;
	const struct kg_arena *a = v->arena;
	for (int j = 0; j < a->n_out && !v->outputs_judged; j++) {
		int s = a->n_in + j;
		const struct kg_arena_slot *sl = &a->slot[s];
		struct kg_cmp local = {0}, *cmp = v->cmp ? &v->cmp[j] : &local;
		const struct kg_tol *t = &v->tol[j];
		if (!kg_compare(kg_arena_ptr(a, s), v->ref[j], sl->dtype, (size_t)sl->numel, t, cmp))
			continue;
		enum kg_reason_code c = code;
		if (code == KG_R_CHECK_MISMATCH && cmp->n_nan && cmp->first_nan == cmp->first_bad)
			c = KG_R_CHECK_NAN;
		/* the norm-wise error beside the element-wise ones: a few stray elements and a uniformly
		 * imprecise output read differently */
		char terms[80] = "", factor[96] = "";
		if (t->terms)
			snprintf(terms, sizeof(terms), " + %.3g*T (each element's own error scale)", t->terms_g);
		if (t->factor_row)
			snprintf(factor, sizeof(factor), " after each row's common factor (within %.3g of 1)", t->factor_cap);
		struct kg_finding *f = kg_findings_add(out, c, s,
					   "output '%s': %lld of %lld elements outside atol=%g rtol=%g%s%s (%lld NaN, %lld Inf "
					   "mismatches); max abs error %g, max rel error %g, norm-wise error %g (%.1f effective "
					   "bits)",
					   name_of(v, s), (long long)cmp->n_bad, (long long)cmp->n, t->atol, t->rtol, terms, factor,
					   (long long)cmp->n_nan, (long long)cmp->n_inf, cmp->max_abs_err, cmp->max_rel_err,
					   cmp->normwise_err, cmp->effective_bits);
		set_values(f, cmp->first_bad, cmp->first_bad_exp, cmp->first_bad_got);
		n++;
	}
	return n;
}

int kg_check_unchanged(const struct kg_view *v, const void *const *before, uint32_t delay_ms,
		       struct kg_findings *out)
{
	const struct kg_arena *a = v->arena;
	for (int j = 0; j < a->n_out; j++) {
		int s = a->n_in + j;
		const struct kg_arena_slot *sl = &a->slot[s];
		const unsigned char *now = kg_arena_ptr(a, s), *was = before[j];
		if (!bytes_differ(now, was, sl->bytes))
			continue;
		size_t k = 0, es = kg_dtype_size(sl->dtype);
		while (now[k] == was[k])
			k++;
		struct kg_finding *f = kg_findings_add(out, KG_R_CHECK_ASYNC_ESCAPE, s,
					   "output '%s' changed %u ms after kg_forward returned: work escaped the call",
					   name_of(v, s), delay_ms);
		set_values(f, (int64_t)(k / es), kg_load(was, sl->dtype, k / es), kg_load(now, sl->dtype, k / es));
		return 1; /* one escaped output says it all */
	}
	return 0;
}

int kg_check_tail(uint64_t tail_ns, uint64_t call_ns, struct kg_findings *out)
{
	/* the bound leaves room for the device-wide synchronisation's own latency */
	if (tail_ns <= 200000 + call_ns / 10)
		return 0;
	kg_findings_add(out, KG_R_CHECK_ASYNC_ESCAPE, -1,
	    "the device stayed busy %.3f ms after the candidate's stream finished (%.3f ms): work was launched outside "
	    "the given stream",
	    (double)tail_ns / 1e6, (double)call_ns / 1e6);
	return 1;
}

/* Sum and count of the finite elements; then whether every element is finite and within the
 * tolerance of a constant c. Both per part, for kg_check_degenerate. */
struct degen_job {
	const void *ref;
	kg_dtype dt;
	double c, atol, rtol;
	double sum[KG_PAR_MAX_PARTS];
	int64_t nfin[KG_PAR_MAX_PARTS];
	int all[KG_PAR_MAX_PARTS];
};

KG_HOT void sum_range(struct degen_job *j, kg_dtype dt, int part, size_t lo, size_t hi)
{
	double sum = 0;
	int64_t nfin = 0;
	for (size_t i = lo; i < hi; i++) {
		double x = kg_load(j->ref, dt, i);
		if (isfinite(x)) {
			sum += x;
			nfin++;
		}
	}
	j->sum[part] = sum;
	j->nfin[part] = nfin;
}

static void sum_part(void *arg, int part, size_t lo, size_t hi)
{
	struct degen_job *j = arg;
	if (j->dt == KG_F32)
		sum_range(j, KG_F32, part, lo, hi);
	else
		sum_range(j, j->dt, part, lo, hi);
}

KG_HOT void near_range(struct degen_job *j, kg_dtype dt, int part, size_t lo, size_t hi)
{
	int all = 1;
	for (size_t i = lo; i < hi && all; i++) {
		double x = kg_load(j->ref, dt, i);
		all = isfinite(x) && fabs(j->c - x) <= j->atol + j->rtol * fabs(x);
	}
	j->all[part] = all;
}

static void near_part(void *arg, int part, size_t lo, size_t hi)
{
	struct degen_job *j = arg;
	if (j->dt == KG_F32)
		near_range(j, KG_F32, part, lo, hi);
	else
		near_range(j, j->dt, part, lo, hi);
}

int kg_check_degenerate(const struct kg_view *v)
{
	const struct kg_arena *a = v->arena;
	for (int j = 0; j < a->n_out; j++) {
		const struct kg_arena_slot *sl = &a->slot[a->n_in + j];
		struct degen_job d = {.ref = v->ref[j], .dt = sl->dtype, .atol = v->tol[j].atol, .rtol = v->tol[j].rtol};
		size_t n = (size_t)sl->numel;
		int parts = kg_parallel_for(n, 1u << 20, sum_part, &d);
		double sum = 0;
		int64_t nfin = 0;
		for (int i = 0; i < parts; i++) { /* in part order: one result for a given core count */
			sum += d.sum[i];
			nfin += d.nfin[i];
		}
		const double consts[2] = {0.0, nfin ? sum / (double)nfin : 0.0};
		/* a scalar (a loss) is its own mean: only 0 is a constant that tells of the class (a constant
		 * answer across trials is check.constant_output's) */
		for (int k = 0; k < (n > 1 ? 2 : 1); k++) {
			d.c = consts[k];
			parts = kg_parallel_for(n, 1u << 20, near_part, &d);
			int all = 1;
			for (int i = 0; i < parts; i++)
				all &= d.all[i];
			/* one output that a constant passes is enough for a shortcut on that output */
			if (all)
				return 1;
		}
	}
	return 0;
}

static uint64_t hash_bytes(const unsigned char *s, size_t n, uint64_t h)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (; i < n; i++)
		h = (h ^ s[i]) * 0xc4ceb9fe1a85ec53ull;
	return h;
}

/* Hashed in 1 MiB blocks on every core, folded in order. The value depends on the size and the
 * core count only, so it is stable across the calls of one run, which is all it is compared
 * over (st->out_hash). */
#define HASH_BLOCK ((size_t)1 << 20)
struct hash_job {
	const unsigned char *p;
	size_t n;
	uint64_t part[KG_PAR_MAX_PARTS];
};

static void hash_part(void *arg, int part, size_t lo, size_t hi)
{
	struct hash_job *j = arg;
	uint64_t h = 0;
	for (size_t b = lo; b < hi; b++) {
		size_t off = b * HASH_BLOCK, len = j->n - off < HASH_BLOCK ? j->n - off : HASH_BLOCK;
		h = h * 0x9e3779b97f4a7c15ull + hash_bytes(j->p + off, len, 0x9e3779b97f4a7c15ull ^ b);
	}
	j->part[part] = h;
}

static uint64_t content_hash(const void *p, size_t n)
{
	struct hash_job j = {.p = p, .n = n};
	int parts = kg_parallel_for((n + HASH_BLOCK - 1) / HASH_BLOCK, 16, hash_part, &j);
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (int i = 0; i < parts; i++)
		h = (h ^ j.part[i]) * 0xff51afd7ed558ccdull;
	return h;
}

int kg_check_shortcuts(const struct kg_view *v, int mismatch, struct kg_shortcut_state *st,
		       struct kg_findings *out)
{
	const struct kg_arena *a = v->arena;
	int n = 0;
	uint64_t in_hash = 0;
	for (int i = 0; i < a->n_in; i++)
		in_hash ^= (v->input_ids ? v->input_ids[i] : content_hash(v->shadow[i], a->slot[i].bytes)) * (uint64_t)(i + 1);
	for (int j = 0; j < a->n_out && j < KG_ARENA_MAX_SLOTS; j++) {
		int s = a->n_in + j;
		const struct kg_arena_slot *sl = &a->slot[s];
		const void *got = kg_arena_ptr(a, s);
		int copied = 0;
		for (int i = 0; i < a->n_in && mismatch && !copied; i++) {
			if (a->slot[i].bytes != sl->bytes || memcmp(got, v->shadow[i], sl->bytes))
				continue;
			kg_findings_add(out, KG_R_CHECK_INPUT_PASSTHROUGH, s, "output '%s' is a copy of input '%s'", name_of(v, s),
			    name_of(v, i));
			copied = 1;
			n++;
		}
		uint64_t h = v->output_hashes ? v->output_hashes[j] : content_hash(got, sl->bytes);
		if (st->have && st->in_hash != in_hash && st->out_hash[j] == h && (mismatch || st->mismatch)) {
			kg_findings_add(out, KG_R_CHECK_CONSTANT_OUTPUT, s, "output '%s' is bit-identical for different inputs, and wrong",
			    name_of(v, s));
			n++;
		}
		st->out_hash[j] = h;
	}
	st->in_hash = in_hash;
	st->mismatch = mismatch;
	st->have = 1;
	return n;
}
