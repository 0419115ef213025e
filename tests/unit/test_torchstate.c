/* Unit tests of a module task's state as kgate reads it (verifier/plan/torchtask.c): the text lines of a
 * state file (the mode, each shape ok or refused and why, each entry's fate at the base shape) up
 * to its "json" line, malformed files refused with a reason, and the state job's spec (the
 * policy's mode, the task's inputs and roles, every shape of the plan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/plan.h"
#include "verifier/plan/torchtask.h"

static void test_parse(void **state)
{
	(void)state;
	static const char text[] = "kgate-state 1\n"
				   "mode eval policy\n"
				   "shape 0 ok\n"
				   "entry bias kept buffer float32 1x1x16x16\n"
				   "entry c_attn.weight drawn parameter float32 48x16\n"
				   "entry bn.running_var drawn variance float32 3\n"
				   "shape 1 refused the Model's forward: RuntimeError: The size of tensor a (16) must match\n"
				   "shape 2 ok\n"
				   "json 2\n{}\x01\x02";
	struct kg_torch_state *st = calloc(1, sizeof(*st));
	kg_error e = {0};
	assert_non_null(st);
	assert_int_equal(kg_torch_state_parse(text, sizeof(text) - 1, st, &e), 0);
	assert_string_equal(st->mode, "eval");
	assert_string_equal(st->mode_from, "policy");
	assert_int_equal(st->n_shapes, 3);
	assert_int_equal(st->refused[0], 0);
	assert_int_equal(st->refused[1], 1);
	assert_int_equal(st->refused[2], 0);
	assert_string_equal(st->why[1], "the Model's forward: RuntimeError: The size of tensor a (16) must match");
	assert_int_equal(st->n_entries, 3);
	assert_string_equal(st->entries[0].name, "bias");
	assert_string_equal(st->entries[0].how, "kept");
	assert_string_equal(st->entries[0].kind, "buffer");
	assert_string_equal(st->entries[0].shape, "1x1x16x16");
	assert_string_equal(st->entries[2].kind, "variance");
	assert_string_equal(st->entries[2].how, "drawn");

	/* not a state file, or one cut before its JSON: refused with the reason */
	assert_int_equal(kg_torch_state_parse("hello\n", 6, st, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "kgate-state 1"));
	static const char cut[] = "kgate-state 1\nmode train problem\nshape 0 ok\n";
	assert_int_equal(kg_torch_state_parse(cut, sizeof(cut) - 1, st, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "json"));
	static const char far[] = "kgate-state 1\nshape 99 ok\njson 2\n{}";
	assert_int_equal(kg_torch_state_parse(far, sizeof(far) - 1, st, &e), -EPROTO);

	/* more entries than the table holds: counted, not lost */
	char many[8192] = "kgate-state 1\nmode train problem\nshape 0 ok\n";
	for (int i = 0; i < 40; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "entry p%d drawn parameter float32 4\n", i);
	strcat(many, "json 2\n{}");
	assert_int_equal(kg_torch_state_parse(many, strlen(many), st, &e), 0);
	assert_int_equal(st->n_entries, 32);
	assert_int_equal(st->n_more, 8);
	free(st);
}

static void test_spec(void **state)
{
	(void)state;
	struct kg_plan *p = calloc(1, sizeof(*p));
	assert_non_null(p);
	p->pol.module_mode = KG_MODULE_MODE_TRAIN;
	p->task.n_inputs = 3;
	snprintf(p->task.inputs[0].name, sizeof(p->task.inputs[0].name), "x");
	snprintf(p->task.inputs[1].name, sizeof(p->task.inputs[1].name), "bn_weight");
	p->task.inputs[1].role = KG_ROLE_WEIGHT;
	snprintf(p->task.inputs[2].name, sizeof(p->task.inputs[2].name), "bn_running_var");
	p->task.inputs[2].role = KG_ROLE_VARIANCE;
	p->n_shapes = 2;
	snprintf(p->shape_str[0], sizeof(p->shape_str[0]), "batch_size=4 features=3");
	snprintf(p->shape_str[1], sizeof(p->shape_str[1]), "batch_size=9 features=3");
	kg_buf b = {0};
	kg_error e = {0};
	assert_int_equal(kg_torch_state_spec(p, &b, &e), 0);
	assert_int_equal(kg_buf_append(&b, "", 1), 0);
	assert_string_equal(b.data, "mode train\n"
				    "input x activation\n"
				    "input bn_weight weight\n"
				    "input bn_running_var variance\n"
				    "shape batch_size=4 features=3\n"
				    "shape batch_size=9 features=3\n");
	kg_buf_free(&b);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_spec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
