/* Batched timed calls on a device: one RUN calls the kernel back to back on many input sets that
 * kgate-device staged side by side (each set the arena's layout, its inputs drawn under a key of
 * its own), so that the trusted span, from the inputs' copy onto the device to the snapshot of
 * every set's outputs, holds many calls and the host's latencies at its two ends are shared out
 * among them. Every set's inputs and guard bands are compared on the device with what was staged,
 * and every set's outputs judged there against the reference's batch on the same sets: a call
 * of the batch that skipped its work, or served another set's result, is as wrong as a lone one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/dtype.h"
#include "verifier/steps.h"
#include "verifier/phases/trial.h"
#include "verifier/run.h"
#include "verifier/judge/clock.h"

/* END's look found a byte of some set changed: which set, and whose byte (an input, a band). */
static void locate_change(const struct kg_run *r, uint32_t sets, uint64_t stride, struct kg_findings *f)
{
	const struct kg_arena *a = &r->ca;
	uint64_t off = r->cs.in_diff, set = off / stride, at = off % stride;
	for (int i = 0; i < a->n_in + a->n_out; i++) {
		const struct kg_arena_slot *sl = &a->slot[i];
		if (at >= sl->off && at < sl->off + sl->bytes) {
			if (i < a->n_in)
				kg_findings_add(f, KG_R_CHECK_INPUT_MODIFIED, i,
					"input '%s' of call %llu of %u back to back changed (byte %llu)", r->names[i],
					(unsigned long long)set, sets, (unsigned long long)(at - sl->off));
			else /* equal to the snapshot at END, then different: written after it */
				kg_findings_add(f, KG_R_CHECK_ASYNC_ESCAPE, i,
					"output '%s' of call %llu of %u back to back changed after the call returned "
					"(byte %llu)",
					r->names[i], (unsigned long long)set, sets, (unsigned long long)(at - sl->off));
			return;
		}
	}
	kg_findings_add(f, KG_R_CHECK_CANARY, -1, "a guard band of call %llu of %u back to back overwritten (arena byte %llu)",
		(unsigned long long)set, sets, (unsigned long long)at);
}

/* The sets whose outputs the device found outside the batch's tolerance where the task allows an
 * element its own terms (compare.h): judged again on the host as a lone call's are, set k's inputs
 * drawn there under its key and both sides' outputs of it fetched. Every reference output is
 * fetched first: the terms take calls of the reference, which end its batch's snapshot. */
static int rejudge_on_host(struct kg_run *r, const unsigned char *again, uint32_t sets, struct kg_findings *f)
{
	const struct kg_arena *ra = &r->ra, *ca = &r->ca;
	int n_out = ca->n_out, n = 0, rc = 0;
	uint64_t lo, hi;
	kg_arena_out_span(ra, &lo, &hi);
	kg_error e = {0};
	for (uint32_t k = 0; k < sets; k++)
		n += again[k];
	void **held = calloc((size_t)n * (size_t)n_out, sizeof(void *));
	if (!held) {
		kg_run_internal(r, "out of memory judging a batch again");
		return -1;
	}
	for (uint32_t k = 0, i = 0; k < sets && !rc; k++) {
		if (!again[k])
			continue;
		if (kg_keeper_fetch_set(&r->keeper, r->rs.dev_slot, ra->used, lo, hi, k, &e)) {
			kg_run_internal(r, "fetching the reference's outputs of set %u from the device: %s", k, e.msg);
			rc = -1;
		}
		for (int j = 0; j < n_out && !rc; j++, i++) {
			const struct kg_arena_slot *sl = &ra->slot[ra->n_in + j];
			if (!(held[i] = malloc(sl->bytes ? sl->bytes : 1))) {
				kg_run_internal(r, "out of memory judging a batch again");
				rc = -1;
			} else {
				memcpy(held[i], kg_arena_ptr(ra, ra->n_in + j), sl->bytes);
			}
		}
	}
	uint32_t key0[8];
	memcpy(key0, r->shadow_gen.d.key, sizeof(key0));
	kg_arena_out_span(ca, &lo, &hi);
	for (uint32_t k = 0, i = 0; k < sets && !rc && !f->n; k++) {
		if (!again[k])
			continue;
		if (kg_keeper_fetch_set(&r->keeper, r->cs.dev_slot, ca->used, lo, hi, k, &e)) {
			kg_run_internal(r, "fetching the candidate's outputs of set %u from the device: %s", k, e.msg);
			rc = -1;
			break;
		}
		for (int j = 0; j < n_out; j++, i++)
			memcpy(r->refout[j], held[i], ra->slot[ra->n_in + j].bytes);
		r->refout_host = r->candout_host = 1;
		/* set k's inputs, on the host: its draw under its own key, a draw of its own */
		kg_gen_set_key(key0, k, r->shadow_gen.d.key);
		r->shadow_gen.host = 0;
		r->shadow_gen.id = ++r->draws;
		kg_trial_host_inputs(r, r->shadow);
		struct kg_view v;
		kg_trial_view(r, &v);
		v.inputs_same = 1; /* as staged: END's look over the batch */
		for (int j = 0; j < n_out; j++)
			r->tol[j].terms = NULL;
		struct kg_findings mine = {0};
		if (kg_trial_check_outputs(r, &v, KG_R_CHECK_STALE_RESULT, &mine))
			for (int x = 0; x < mine.n; x++)
				kg_findings_add(f, mine.f[x].code, mine.f[x].slot, "call %u of %u back to back: %s", k, sets, mine.f[x].msg);
		if (!kg_run_ok(r))
			rc = -1;
	}
	for (int i = 0; i < n * n_out; i++)
		free(held[i]);
	free(held);
	return rc;
}

/* Every set's outputs against the reference's batch, on the device, under the batch's tolerance. */
static int judge_outputs(struct kg_run *r, uint32_t sets, uint64_t stride, struct kg_findings *f)
{
	const struct kg_arena *a = &r->ca;
	int n_out = a->n_out, total = (int)sets * n_out, failed = 0, rechecks = 0;
	unsigned char again[KG_DEV_MAX_SETS] = {0};
	kg_error e = {0};
	for (int at = 0; at < total && !failed; at += KG_DEV_MAX_CHECKS) {
		struct kg_dev_check chk[KG_DEV_MAX_CHECKS];
		struct kg_dev_cmp out[KG_DEV_MAX_CHECKS];
		int n = total - at < KG_DEV_MAX_CHECKS ? total - at : KG_DEV_MAX_CHECKS;
		for (int i = 0; i < n; i++) {
			int j = (at + i) % n_out;
			uint64_t shift = (uint64_t)((at + i) / n_out) * stride;
			if (kg_trial_compare_check(r, j, shift, &chk[i])) {
				kg_run_internal(r, "output '%s' of a batch cannot be judged on the device", r->names[a->n_in + j]);
				return -1;
			}
		}
		int krc = kg_keeper_check(&r->keeper, r->cs.dev_slot, r->rs.dev_slot, chk, n, out, &e);
		if (krc == -ETIMEDOUT) {
			kg_session_kill_held(&r->cs);
			return -2;
		}
		if (krc) {
			kg_run_internal(r, "judging a batch's outputs on the device (%s): %s", kg_run_shape_str(r), e.msg);
			return -1;
		}
		for (int i = 0; i < n && !failed; i++) {
			int j = (at + i) % n_out, set = (at + i) / n_out, s = a->n_in + j;
			const struct kg_dev_cmp *d = &out[i];
			if (d->first_unwritten >= 0) {
				kg_findings_add(f, KG_R_CHECK_UNWRITTEN_OUTPUT, s,
					"output '%s' of call %d of %u back to back left element %lld unwritten", r->names[s],
					set, sets, (long long)d->first_unwritten);
				failed = 1;
			} else if (d->n_bad && r->plan->task.outputs[j].terms) {
				again[set] = 1; /* each element's own terms may allow it: the host's to say */
				rechecks = 1;
			} else if (d->n_bad) {
				kg_findings_add(f, KG_R_CHECK_STALE_RESULT, s,
					"output '%s' of call %d of %u back to back is wrong: %lld of %lld elements, the first "
					"at %lld (got %.9g, expected %.9g)",
					r->names[s], set, sets, (long long)d->n_bad, (long long)d->n, (long long)d->first_bad,
					d->first_bad_got, d->first_bad_exp);
				failed = 1;
			}
		}
	}
	return failed || !rechecks ? 0 : rejudge_on_host(r, again, sets, f);
}

int kg_timing_batched(struct kg_run *r, uint32_t sets, enum kg_input_class cls, uint64_t seed, uint64_t *ref_ns,
		   struct kg_cand_call *c)
{
	uint64_t stride = r->batch_stride;
	kg_trial_gen_inputs(r, cls, seed);
	if (kg_trial_ref_quiet(r, sets, ref_ns)) /* on a quiet device (trial_ref.c) */
		return -1;
	r->batch_sets = sets;
	kg_trial_candidate(r, 1, cls, seed, c);
	r->batch_sets = 0;
	if (r->cand_dead || !c->ok)
		return -1;
	uint64_t t0 = kg_now_ns();
	struct kg_findings f = {0};
	if (!r->cs.inputs_same)
		locate_change(r, sets, stride, &f);
	int rc = f.n ? 0 : judge_outputs(r, sets, stride, &f);
	if (rc == -2)
		kg_run_cand_failed(r, KG_SESSION_ENDED, NULL, "after kg_forward returned", "CHECK", cls, seed, 1);
	if (rc)
		return -1;
	kg_check_tail(c->r.tail_ns, c->r.child_ns, &f);
	kg_steps_add(KG_STEP_CHECKS, t0);
	kg_run_record(r, &f, cls, seed, "during timing");
	return f.n ? -1 : 0;
}
