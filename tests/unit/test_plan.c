/* The plan's secrets and shapes: a fresh 256-bit key per run (or the report's, with --seed), keys
 * derived per use, the secret random shapes (every residue mod 4 of each ranged dimension in every
 * run) beside the fixed variants, and every input class on every shape. Runs from the source tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/plan.h"

static int build(struct kg_plan *p, const char *seed_text, uint64_t seed, int has_seed)
{
	struct kg_verify_opts o = {.task = "softmax", .candidate = "examples/softmax/online.c",
				   .policy = "policy/ci.yaml", .iterations = -1, .has_seed = has_seed,
				   .seed_text = seed_text, .seed = seed};
	kg_error e = {0};
	return kg_plan_build(&o, p, &e);
}

static int64_t dim(const kg_dims *d, const char *name)
{
	int64_t v = -1;
	kg_dims_get(d, name, &v);
	return v;
}

static void test_shapes_and_classes(void **state)
{
	(void)state;
	struct kg_plan *p = malloc(sizeof(*p));
	assert_int_equal(build(p, NULL, 0, 0), 0);
	assert_int_equal(p->n_random, 4);
	assert_int_equal(p->n_shapes, 1 + p->task.n_variants + 4);
	for (int d = 0; d < 2; d++) {
		const char *name = d ? "C" : "R";
		unsigned residues = 0;
		for (int s = p->n_shapes - 4; s < p->n_shapes; s++) {
			int64_t v = dim(&p->shapes[s], name);
			assert_true(v >= p->task.range_lo[d] && v <= p->task.range_hi[d]);
			residues |= 1u << (v % 4);
		}
		assert_int_equal(residues, 0xf); /* every residue mod 4 in every run */
	}
	for (int s = 0; s < p->n_shapes; s++)
		for (int k = 0; k < KG_CLASS_COUNT_; k++)
			assert_int_equal(kg_plan_trials(p, s, (enum kg_input_class)k) > 0, (int)(p->classes >> k & 1));
	assert_true(p->classes >> KG_CLASS_LARGE_MEAN & 1);
	assert_true(p->classes >> KG_CLASS_NEAR_DUPLICATE & 1);
	kg_plan_free(p);
	free(p);
}

/* Timed calls draw only classes whose inputs depend on the trial's key: never zeros, ones or
 * identity (kgate 0.2 timed them too, so a content-keyed cache served a fifth of the calls), and
 * every seeded class the base shape runs. */
static void test_timed_classes(void **state)
{
	(void)state;
	struct kg_plan *p = malloc(sizeof(*p));
	assert_int_equal(build(p, NULL, 0, 0), 0);
	enum kg_input_class k[KG_CLASS_COUNT_];
	int n = kg_plan_timed_classes(p, k);
	unsigned got = 0;
	for (int i = 0; i < n; i++) {
		assert_true(kg_class_is_seeded(k[i]));
		assert_true(kg_plan_trials(p, 0, k[i]) > 0);
		got |= 1u << k[i];
	}
	for (int c = 0; c < KG_CLASS_COUNT_; c++)
		if (kg_plan_trials(p, 0, (enum kg_input_class)c) > 0 && kg_class_is_seeded((enum kg_input_class)c))
			assert_true(got >> c & 1);
	assert_false(got >> KG_CLASS_ZEROS & 1);
	assert_false(got >> KG_CLASS_ONES & 1);
	assert_false(got >> KG_CLASS_IDENTITY & 1);
	assert_true(got >> KG_CLASS_SPIKED & 1);
	assert_true(got >> KG_CLASS_MIXED & 1);
	/* a policy of unseeded classes only (and normal, which is required) still times normal */
	p->classes = 1u << KG_CLASS_ZEROS | 1u << KG_CLASS_ONES;
	assert_int_equal(kg_plan_timed_classes(p, k), 1);
	assert_int_equal(k[0], KG_CLASS_NORMAL);
	kg_plan_free(p);
	free(p);
}

static void test_keys(void **state)
{
	(void)state;
	struct kg_plan *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	assert_int_equal(build(a, NULL, 0, 0), 0);
	assert_int_equal(build(b, NULL, 0, 0), 0);
	assert_memory_not_equal(&a->key, &b->key, sizeof(a->key)); /* fresh each run */
	/* derived keys differ from each other and from the run's key */
	assert_memory_not_equal(&a->k_inputs, &a->k_canary, sizeof(kg_key));
	assert_memory_not_equal(&a->k_canary, &a->k_poison, sizeof(kg_key));
	assert_memory_not_equal(&a->k_inputs, &a->key, sizeof(kg_key));
	/* the report's seed reproduces the run: the same key, the same secret shapes */
	char hex[KG_KEY_HEX_LEN + 1];
	kg_key_hex(&a->key, hex);
	kg_plan_free(b);
	assert_int_equal(build(b, hex, 0, 1), 0);
	assert_memory_equal(&a->key, &b->key, sizeof(kg_key));
	assert_memory_equal(&a->k_inputs, &b->k_inputs, sizeof(kg_key));
	assert_int_equal(a->n_shapes, b->n_shapes);
	for (int s = 0; s < a->n_shapes; s++)
		assert_int_equal(dim(&a->shapes[s], "C"), dim(&b->shapes[s], "C"));
	/* a number is hashed into a key: "42" and "0x2a" are the same number */
	kg_plan_free(a);
	kg_plan_free(b);
	assert_int_equal(build(a, "42", 42, 1), 0);
	assert_int_equal(build(b, "0x2a", 42, 1), 0);
	assert_memory_equal(&a->key, &b->key, sizeof(kg_key));
	kg_plan_free(a);
	kg_plan_free(b);
	/* 64 characters that are not hex digits */
	char bad[65];
	memset(bad, 'g', 64);
	bad[64] = '\0';
	assert_int_not_equal(build(a, bad, 0, 1), 0);
	kg_plan_free(a);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes_and_classes), cmocka_unit_test(test_timed_classes),
		cmocka_unit_test(test_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
