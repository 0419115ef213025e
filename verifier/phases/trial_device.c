/* A trial's trusted-device half, seen from kgate: the draws behind its inputs (parameters under the
 * trial's key, which kgate-device draws on the GPU; the host draws a buffer only when a check or a
 * host runner reads it), and the judgement of its outputs by kgate-device (CHECK's figures into
 * the comparison's, both sides' outputs fetched for the host only where the device found
 * something to name). */
#include <errno.h>
#include <string.h>

#include "verifier/judge/compare.h"
#include "verifier/plan/dtype.h"
#include "verifier/plan/inputs.h"
#include "verifier/plan/parallel.h"
#include "verifier/plan/prng.h"
#include "verifier/steps.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"

void kg_trial_gen_inputs(struct kg_run *r, enum kg_input_class cls, uint64_t seed)
{
	kg_trial_gen_into(r, 0, cls, seed);
}

static struct kg_run_draw *draw_of(struct kg_run *r, void *const *buf)
{
	return buf == r->shadow ? &r->shadow_gen : buf == r->shadow_next ? &r->shadow_next_gen : NULL;
}

void kg_trial_gen_into(struct kg_run *r, int next, enum kg_input_class cls, uint64_t seed)
{
	/* the trial's own key: its inputs say nothing of any other trial's, nor of the run's key */
	uint64_t t0 = kg_now_ns();
	kg_key tk;
	kg_key_derive(&r->plan->k_inputs, KG_DOM_INPUTS, seed, &tk);
	struct kg_run_draw *g = next ? &r->shadow_next_gen : &r->shadow_gen;
	memset(g, 0, sizeof(*g));
	g->id = ++r->draws;
	memcpy(g->d.key, tk.w, sizeof(g->d.key));
	g->d.n = r->plan->task.n_inputs;
	for (int i = 0; i < r->plan->task.n_inputs; i++) {
		const struct kg_arena_slot *s = &r->ca.slot[i];
		kg_inputs_params(&g->d.t[i], s->dtype, (size_t)s->numel, s->shape, s->ndim, r->plan->task.inputs[i].role,
				 cls, r->plan->classes, &tk, i);
		/* a large mean sized to the task's bounds (plan.c): the one-pass variance it is there to
		 * catch fails by as many bounds under a loose tolerance as under a tight one */
		if (s->dtype == KG_F32)
			kg_inputs_size_large_mean(&g->d.t[i], r->plan->large_mean_lo);
	}
	memset(&tk, 0, sizeof(tk));
	if (!r->dev_gen)
		kg_trial_host_inputs(r, next ? r->shadow_next : r->shadow);
	kg_steps_add(KG_STEP_GEN, t0);
}

void *const *kg_trial_host_inputs(struct kg_run *r, void *const *src)
{
	struct kg_run_draw *g = draw_of(r, src);
	if (!g || g->host)
		return src;
	uint64_t t0 = kg_now_ns();
	kg_key tk;
	memcpy(tk.w, g->d.key, sizeof(tk.w));
	for (int i = 0; i < g->d.n; i++)
		kg_inputs_fill_tensor(src[i], &g->d.t[i], &tk);
	memset(&tk, 0, sizeof(tk));
	g->host = 1;
	kg_steps_add(KG_STEP_GEN, t0);
	return src;
}

const struct kg_call_draw *kg_trial_device_draw(struct kg_run *r, void *const *src)
{
	const struct kg_run_draw *g = draw_of(r, src);
	return r->dev_gen && g && !g->host && g->d.n == r->plan->task.n_inputs ? &g->d : NULL;
}

/* What tells two draws' contents apart without holding them: a draw that takes no keystream
 * (zeros, ones, a square identity) is the same for every key, any other is its key's. */
static uint64_t draw_id(const struct kg_call_draw *d, int i)
{
	const struct kg_gen_tensor *t = &d->t[i];
	uint64_t h = 0x9e3779b97f4a7c15ull ^ t->n ^ ((uint64_t)t->kind << 40) ^ ((uint64_t)t->dtype << 48) ^ t->mat << 8;
	if (!kg_gen_keyless(t))
		for (int w = 0; w < 8; w++)
			h = (h ^ d->key[w]) * 0xff51afd7ed558ccdull;
	return (h ^ (h >> 29)) * 0xc4ceb9fe1a85ec53ull ^ (uint64_t)i;
}

void kg_trial_view_inputs(struct kg_run *r, struct kg_view *v)
{
	v->inputs_same = r->cs.inputs_same;
	if (!v->inputs_same)
		kg_trial_host_inputs(r, r->shadow);
	v->input_ids = NULL;
	if (r->dev_gen) {
		for (int i = 0; i < r->shadow_gen.d.n; i++)
			r->input_ids[i] = draw_id(&r->shadow_gen.d, i);
		v->input_ids = r->input_ids;
	}
}

void kg_trial_load_inputs_from(struct kg_run *r, struct kg_arena *a, void *const *src)
{
	kg_trial_host_inputs(r, src);
	for (int i = 0; i < r->plan->task.n_inputs; i++)
		kg_arena_put(a, i, src[i]);
}

static void cmp_from_device(const struct kg_dev_cmp *d, struct kg_cmp *c)
{
	*c = (struct kg_cmp){
		.n = d->n,
		.n_bad = d->n_bad,
		.n_nan = d->n_nan,
		.n_inf = d->n_inf,
		.first_bad = d->first_bad,
		.first_bad_got = d->first_bad_got,
		.first_bad_exp = d->first_bad_exp,
		.first_nan = d->first_nan,
		.max_abs_idx = d->max_abs_idx,
		.max_abs_err = d->max_abs_err,
		.max_abs_got = d->max_abs_got,
		.max_abs_exp = d->max_abs_exp,
		.max_rel_idx = d->max_rel_idx,
		.max_rel_err = d->max_rel_err,
		.err_sq = d->err_sq,
		.ref_sq = d->ref_sq,
		.res_sq = d->res_sq,
		.factor_max = d->factor_max,
		.tol_used = d->tol_used,
		.tol_used_idx = d->tol_used_idx,
	};
	kg_cmp_finish(c);
}

int kg_trial_fetch_outputs(struct kg_run *r, const struct kg_session *s, const char *whose)
{
	uint64_t lo, hi;
	kg_arena_out_span(s->arena, &lo, &hi);
	kg_error e = {0};
	if (hi > lo && kg_keeper_fetch(&r->keeper, s->dev_slot, s->arena->used, lo, hi, &e)) {
		kg_run_internal(r, "fetching the %s outputs from the device (%s): %s", whose, kg_run_shape_str(r), e.msg);
		return -1;
	}
	return 0;
}

int kg_trial_candout_host(struct kg_run *r)
{
	if (r->candout_host)
		return 0;
	if (kg_trial_fetch_outputs(r, &r->cs, "candidate's"))
		return -1;
	r->candout_host = 1;
	return 0;
}

int kg_trial_host_judges(struct kg_run *r)
{
	return kg_trial_refout_host(r) || kg_trial_candout_host(r) ? -1 : 0;
}

int kg_trial_compare_check(const struct kg_run *r, int j, uint64_t shift, struct kg_dev_check *chk)
{
	const struct kg_arena *a = &r->ca;
	const struct kg_arena_slot *sl = &a->slot[a->n_in + j], *rl = &r->ra.slot[a->n_in + j];
	const struct kg_tol *t = &r->tol[j];
	if (t->terms || rl->numel != sl->numel || rl->dtype != sl->dtype)
		return -1;
	/* compare.c fits row factors only where whole rows of a float tensor */
	int rows = t->factor_row > 0 && kg_dtype_is_float(sl->dtype) && sl->numel % t->factor_row == 0;
	*chk = (struct kg_dev_check){.off = sl->off + shift,
				     .ref_off = rl->off + shift,
				     .n = (uint64_t)sl->numel,
				     .poison = sl->poison,
				     .row = rows ? (uint64_t)t->factor_row : 0,
				     .atol = t->atol,
				     .rtol = t->rtol,
				     .cap = t->factor_cap,
				     .dtype = (uint32_t)sl->dtype,
				     .mode = KG_DEV_CHK_COMPARE};
	return 0;
}

int kg_trial_device_judge(struct kg_run *r)
{
	const struct kg_arena *a = &r->ca;
	struct kg_dev_check chk[KG_DEV_MAX_CHECKS];
	struct kg_dev_cmp out[KG_DEV_MAX_CHECKS];
	r->judged = 0;
	if (r->refout_host || !r->dev_check || a->n_out > KG_DEV_MAX_CHECKS)
		return kg_trial_host_judges(r);
	for (int j = 0; j < a->n_out; j++)
		if (kg_trial_compare_check(r, j, 0, &chk[j])) /* per-element terms: the host's */
			return kg_trial_host_judges(r);
	uint64_t t0 = kg_now_ns();
	kg_error e = {0};
	int krc = kg_keeper_check(&r->keeper, r->cs.dev_slot, r->rs.dev_slot, chk, a->n_out, out, &e);
	if (krc == -ETIMEDOUT) {
		kg_session_kill_held(&r->cs);
		return -2;
	}
	if (krc) {
		kg_run_internal(r, "judging the candidate's outputs on the device (%s): %s", kg_run_shape_str(r), e.msg);
		return -1;
	}
	kg_steps_add(KG_STEP_JUDGE, t0);
	for (int j = 0; j < a->n_out; j++)
		r->out_hash[j] = out[j].hash;
	r->out_hash_ok = 1;
	for (int j = 0; j < a->n_out; j++)
		if (out[j].n_bad || out[j].first_unwritten >= 0) /* the host says which, and how */
			return kg_trial_host_judges(r);
	for (int j = 0; j < a->n_out; j++)
		cmp_from_device(&out[j], &r->cmp[j]);
	r->judged = 1;
	return 1;
}

int kg_trial_refout_host(struct kg_run *r)
{
	const struct kg_plan *p = r->plan;
	struct kg_arena *a = &r->ra;
	if (r->refout_host)
		return 0;
	if (kg_trial_fetch_outputs(r, &r->rs, "reference's"))
		return -1;
	for (int j = 0; j < p->task.n_outputs; j++) {
		int s = p->task.n_inputs + j;
		kg_parallel_copy(r->refout[j], kg_arena_ptr(a, s), a->slot[s].bytes);
	}
	r->refout_host = 1;
	return 0;
}
