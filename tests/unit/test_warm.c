/* The START records kgate sends kgate-device over a device run of more than one shape, without a
 * GPU: the reference's first call at every shape (run.c's warm-up, before the candidate is
 * loaded), then the trials from the base shape on (the reference's call, the candidate's copying
 * the reference's staged inputs, a gated batch of each), each checked as kgate-device checks it
 * (kg_stage_valid, with each slot's book kept by kgate-device's rules: kg_stage_src_of). The plan,
 * both arenas, the draws and the staging plans are the verifier's own (kg_plan_build, kg_run_alloc,
 * kg_start_warm_shape, kg_run_layout_both, kg_session_stage_plan, kg_keeper_start_cmd); the two
 * sessions are stand-ins holding a keeper's caps and a slot.
 * On an H100, kgate main c0d1609 ended every multi-shape plan in exit 3: "running the reference
 * (R=64 C=1000, upload): kgate-device: bad START ranges". The warm-up laid out the reference's
 * arena alone, and the draws are made at the candidate arena's layout, which kg_run_alloc had left
 * at the last shape: the base shape's START asked kgate-device to draw the last shape's tensor
 * into the base shape's slot. Runs from the source tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/session/keeper.h"
#include "device/stage.h"
#include "verifier/plan/plan.h"
#include "verifier/phases/phases.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"
#include "verifier/session/session.h"

/* One side's call as kgate-device sees it: the START record kgate builds for it, checked against
 * the other slot's book, then this slot's book as kgate-device keeps it after START and END. */
struct side {
	struct kg_session *s;
	struct kg_stage_book *book; /* two: the reference's slot 0, the candidate's slot 1 */
};

static void start_and_end(struct side *x, const struct kg_call *call, const char *what)
{
	struct kg_session *s = x->s;
	struct kg_keeper_stage st = {0};
	kg_error e = {0};
	uint64_t lo, hi;
	kg_arena_out_span(s->arena, &lo, &hi);
	uint32_t sets = call->sets > 1 ? call->sets : 1;
	int rc = kg_session_stage_plan(s, call, &st, &e);
	if (rc)
		fail_msg("%s: kgate's staging plan: %s", what, e.msg);
	if (sets > 1) {
		st.sets = sets;
		st.stride = call->stride;
	}
	st.gate = 1;
	st.out_lo = lo;
	st.out_hi = hi;
	struct kg_dev_cmd c;
	kg_keeper_start_cmd(s->dev_slot, s->arena->used, 1, &st, &c);
	/* kgate-device's do_start: another attached slot's book, else none */
	struct kg_stage_src src = {0};
	if (c.src_slot < 2 && (int)c.src_slot != s->dev_slot)
		src = kg_stage_src_of(&x->book[c.src_slot], sets, c.stride);
	char why[240] = "";
	if (!kg_stage_valid(&c, &src, why, sizeof(why)))
		fail_msg("%s: kgate-device: bad START ranges: %s", what, why);
	assert_int_equal(kg_stage_gate_valid(&c, 1, sets), 1);
	/* START, then END (a gated call's snapshot is queued at START), as kgate-device books them */
	struct kg_stage_book *b = &x->book[s->dev_slot];
	uint64_t extent = (uint64_t)(sets - 1) * (sets > 1 ? c.stride : 0) + c.bytes;
	*b = (struct kg_stage_book){.staged = extent, .snap_lo = lo, .snap_hi = hi, .stride = sets > 1 ? c.stride : 0,
				    .sets = sets, .snap_sets = sets};
}

/* the reference's call on this trial's draw (trial_ref.c's ref_exec), its outputs' poison picked */
static void ref_call(struct kg_run *r, struct side *x, uint32_t sets, const char *what)
{
	kg_arena_poison_pick(&r->ra, 0x7265660000ull + r->ref_poison_seq++);
	const struct kg_call_draw *d = kg_trial_device_draw(r, r->shadow);
	assert_non_null(d); /* drawn on the device (dev_gen) */
	struct kg_call call = {.flush = 1, .draw = d, .keep = 1, .sets = sets, .stride = r->batch_stride};
	start_and_end(x, &call, what);
	r->ref_staged_draw = r->shadow_gen.id; /* trial_ref.c's ref_expose */
}

/* the candidate's call (trial.c's kg_trial_candidate): the reference's staged inputs copied on the
 * device where its last call staged this very draw */
static void cand_call(struct kg_run *r, struct side *x, uint32_t sets, const char *what)
{
	kg_arena_poison_pick(&r->ca, 0x63616e64ull + r->trial_no++);
	struct kg_call call = {.flush = 1, .keep = 1, .sets = sets, .stride = r->batch_stride};
	assert_int_equal(r->ref_staged_draw, r->shadow_gen.id);
	call.inputs_from = 1 + r->rs.dev_slot;
	start_and_end(x, &call, what);
}

static void test_warm_up_then_trials(void **state)
{
	(void)state;
	struct kg_verify_opts o = {.task = "softmax", .candidate = "examples/cuda/softmax/online.cu",
				   .policy = "tests/data/gpu-ci.yaml", .iterations = -1, .has_seed = 1, .seed = 36};
	struct kg_plan *p = calloc(1, sizeof(*p));
	struct kg_run *r = calloc(1, sizeof(*r));
	struct kg_verdict *v = calloc(1, sizeof(*v));
	kg_error e = {0};
	assert_non_null(p);
	assert_non_null(r);
	assert_non_null(v);
	kg_verdict_init(v);
	if (kg_plan_build(&o, p, &e))
		fail_msg("the plan: %s", e.msg);
	assert_true(p->ref_be->needs_gpu && p->be->needs_gpu);
	assert_true(p->n_shapes > 2); /* the base shape, its variants, the random ones */
	r->ra.fd = r->ca.fd = -1;
	r->shape = -1;
	r->plan = p;
	r->v = v;
	if (kg_run_alloc(r, &e))
		fail_msg("the run's buffers: %s", e.msg);
	/* the keeper's caps, as kgate-device's HELLO gives them where it has its kernels */
	r->keeper.caps = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP | KG_DEV_CAP_CHECK | KG_DEV_CAP_GATE;
	r->rs.keeper = &r->keeper;
	r->rs.arena = &r->ra;
	r->rs.loaded = 1;
	r->rs.dev_slot = 0;
	r->cs.keeper = &r->keeper;
	r->cs.arena = &r->ca;
	r->cs.loaded = 1;
	r->cs.dev_slot = 1;
	r->dev_gen = 1;
	size_t cap = r->ra.capacity > r->ca.capacity ? r->ra.capacity : r->ca.capacity;
	r->batch_stride = ((uint64_t)cap + 4095) / 4096 * 4096;
	struct kg_stage_book book[2] = {{0}};
	struct side ref = {&r->rs, book}, cand = {&r->cs, book};
	char what[160];

	/* the warm-up: one call of the reference at every shape, the candidate not yet loaded */
	for (int s = 0; s < p->n_shapes; s++) {
		if (kg_start_warm_shape(r, s, &e))
			fail_msg("the warm-up's layout at shape %d: %s", s, e.msg);
		snprintf(what, sizeof(what), "the reference's first call at %s", p->shape_str[s]);
		ref_call(r, &ref, 1, what);
	}
	r->ref_staged_draw = 0; /* ref_warm_up's end */

	/* the trials, from the base shape on: the reference's call, then the candidate's copying its
	 * staged inputs; at the base shape a gated batch of each too (the timing's) */
	for (int s = 0; s < p->n_shapes; s++) {
		if (kg_run_layout_both(r, s, &e))
			fail_msg("shape %d: %s", s, e.msg);
		assert_int_equal(r->ref_staged_draw, 0); /* staged at another layout: nothing copied */
		for (int t = 0; t < 2; t++) {
			kg_trial_gen_inputs(r, KG_CLASS_NORMAL, 1000u * (uint64_t)s + (uint64_t)t);
			snprintf(what, sizeof(what), "trial %d's reference at %s", t, p->shape_str[s]);
			ref_call(r, &ref, 1, what);
			snprintf(what, sizeof(what), "trial %d's candidate at %s", t, p->shape_str[s]);
			cand_call(r, &cand, 1, what);
		}
		if (s == 0) {
			kg_trial_gen_inputs(r, KG_CLASS_NORMAL, 77);
			snprintf(what, sizeof(what), "a batch of 8 of the reference at %s", p->shape_str[s]);
			ref_call(r, &ref, 8, what);
			snprintf(what, sizeof(what), "a batch of 8 of the candidate at %s", p->shape_str[s]);
			cand_call(r, &cand, 8, what);
		}
	}

	/* kgate-device's own rule, should a copy ever be asked of a source staged at another shape:
	 * refused, and said why (the base shape's inputs from the last shape's staging) */
	if (kg_run_layout_both(r, 0, &e))
		fail_msg("shape 0: %s", e.msg);
	struct kg_keeper_stage st = {0};
	struct kg_call call = {.inputs_from = 1};
	assert_int_equal(kg_session_stage_plan(&r->cs, &call, &st, &e), 0);
	struct kg_dev_cmd c;
	kg_keeper_start_cmd(1, r->ca.used, 1, &st, &c);
	struct kg_stage_book small = book[0];
	small.staged = st.range[0].off + st.range[0].bytes - 8; /* a source that staged less */
	small.snap_lo = small.snap_hi = small.staged;
	struct kg_stage_src src = kg_stage_src_of(&small, 1, 0);
	char why[240] = "";
	assert_int_equal(kg_stage_valid(&c, &src, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "past what source slot 0 staged"));

	kg_run_free(r);
	kg_verdict_free(v);
	kg_plan_free(p);
	free(p);
	free(r);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warm_up_then_trials),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
