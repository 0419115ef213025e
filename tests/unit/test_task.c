/* Unit tests of task manifests: the shipped tasks load, and malformed manifests fail with a
 * message naming the file, the line and the field, without crashing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verifier/plan/task.h"

static char dir[] = "/tmp/kgate-test-task-XXXXXX";

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	char p[256];
	snprintf(p, sizeof(p), "%s/ref.c", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fputs("/* empty */\n", f);
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

static const char *good =
	"kgate_task: 1\n"
	"name: t\n"
	"dims: [R, C]\n"
	"shapes:\n"
	"  ci: {R: 2, C: 3}\n"
	"  nominal: {R: 4, C: 5}\n"
	"variants:\n"
	"  - {C: 1}\n"
	"inputs:\n"
	"  - {name: x, dtype: f32, shape: [R, C]}\n"
	"  - {name: w, dtype: bf16, shape: [C], role: weight}\n"
	"outputs:\n"
	"  - {name: y, dtype: f32, shape: [R, (C+1)/2]}\n"
	"tolerance: {atol: 1e-5, rtol: 1e-4, rms: 1e-6}\n"
	"cost: {bytes: 8*R*C, flops: 2*R*C}\n"
	"reference: {c: ref.c}\n"
	"exclude_classes: [identity]\n";

/* Writes text as task.yaml, loads it, returns rc and the message. */
static int load_text(const char *text, struct kg_task *t, kg_error *e)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/task.yaml", dir);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	memset(e, 0, sizeof(*e));
	return kg_task_load(p, t, e);
}

static void test_good(void **state)
{
	(void)state;
	struct kg_task *t = malloc(sizeof(*t));
	kg_error e;
	assert_int_equal(load_text(good, t, &e), 0);
	assert_string_equal(t->name, "t");
	assert_string_equal(t->shapesets[0].name, "nominal");
	assert_int_equal(t->n_shapesets, 2);
	assert_int_equal(t->inputs[1].role, KG_ROLE_WEIGHT);
	assert_int_equal(t->inputs[1].dtype, KG_BF16);
	/* a module task's running statistics: roles of their own (drawn per trial, a variance valid) */
	char stats[2048];
	const char *rw = strstr(good, "role: weight}");
	assert_non_null(rw);
	snprintf(stats, sizeof(stats), "%.*srole: variance}\n  - {name: m, dtype: f32, shape: [C], role: statistic}%s",
		 (int)(rw - good), good, rw + strlen("role: weight}"));
	assert_int_equal(load_text(stats, t, &e), 0);
	assert_int_equal(t->inputs[1].role, KG_ROLE_VARIANCE);
	assert_int_equal(t->inputs[2].role, KG_ROLE_STATISTIC);
	assert_int_equal(load_text(good, t, &e), 0);
	int64_t shape[KG_MAX_DIMS];
	assert_int_equal(kg_task_shape(&t->outputs[0], &t->shapesets[0].dims, shape, &e), 0);
	assert_int_equal(shape[1], 3);
	kg_dims v;
	kg_task_variant_dims(t, &t->shapesets[0].dims, 0, &v);
	int64_t c;
	assert_int_equal(kg_dims_get(&v, "C", &c), 0);
	assert_int_equal(c, 1);
	double cost;
	assert_int_equal(kg_task_cost(t, t->cost_flops, &t->shapesets[0].dims, &cost), 0);
	assert_true(cost == 40);
	assert_true(t->rms_tol == 1e-6);
	/* no reduction declared: 1; one declared: evaluated at the shape */
	int64_t red;
	assert_int_equal(kg_task_reduction(&t->outputs[0], &t->shapesets[0].dims, &red, &e), 0);
	assert_int_equal(red, 1);
	char rtext[4096];
	const char *sh = strstr(good, "shape: [R, (C+1)/2]}");
	snprintf(rtext, sizeof(rtext), "%.*sshape: [R, (C+1)/2], reduction: 2*C}%s", (int)(sh - good), good,
		 sh + strlen("shape: [R, (C+1)/2]}"));
	assert_int_equal(load_text(rtext, t, &e), 0);
	assert_string_equal(t->outputs[0].reduction, "2*C");
	assert_int_equal(kg_task_reduction(&t->outputs[0], &t->shapesets[0].dims, &red, &e), 0);
	assert_int_equal(red, 10);
	assert_int_equal(t->outputs[0].terms, KG_TERMS_NONE);
	snprintf(rtext, sizeof(rtext), "%.*sshape: [R, (C+1)/2], reduction: 2*C, terms: abs_inputs}%s", (int)(sh - good),
		 good, sh + strlen("shape: [R, (C+1)/2]}"));
	assert_int_equal(load_text(rtext, t, &e), 0);
	assert_int_equal(t->outputs[0].terms, KG_TERMS_ABS_INPUTS);
	char rref[4096];
	snprintf(rref, sizeof(rref), "%.*sshape: [R, (C+1)/2], reduction: 2*C, terms: reference}%s", (int)(sh - good),
		 good, sh + strlen("shape: [R, (C+1)/2]}"));
	assert_int_equal(load_text(rref, t, &e), 0);
	assert_int_equal(t->outputs[0].terms, KG_TERMS_REFERENCE);
	assert_int_equal(t->outputs[0].factor_row, 0);
	/* factor: row, a row normalised by its own reduction */
	char rfac[4096];
	snprintf(rfac, sizeof(rfac), "%.*sshape: [R, (C+1)/2], reduction: 2*C, factor: row}%s", (int)(sh - good), good,
		 sh + strlen("shape: [R, (C+1)/2]}"));
	assert_int_equal(load_text(rfac, t, &e), 0);
	assert_int_equal(t->outputs[0].factor_row, 1);
	/* an integer input has no absolute value to run on */
	const char *w = strstr(rtext, "dtype: bf16");
	memcpy((char *)w, "dtype: u8  ", 11);
	assert_true(load_text(rtext, t, &e) < 0);
	assert_non_null(strstr(e.msg, "input 'w' is an integer"));
	/* random shape ranges */
	char text[4096];
	const char *at = strstr(good, "inputs:");
	snprintf(text, sizeof(text), "%.*srandom_shapes: {count: 3, ranges: {C: [5, 40]}}\n%s", (int)(at - good), good, at);
	assert_int_equal(load_text(text, t, &e), 0);
	assert_int_equal(t->n_random, 3);
	assert_int_equal(t->n_ranges, 1);
	assert_string_equal(t->range_dim[0], "C");
	assert_true(t->range_lo[0] == 5 && t->range_hi[0] == 40);
	free(t);
}

struct bad_case {
	const char *from, *to; /* replace `from` in the good manifest by `to` */
	const char *expect[3]; /* substrings of the message */
};

static void test_malformed(void **state)
{
	(void)state;
	static const struct bad_case cases[] = {
		{"rtol: 1e-4", "rtol: lots", {":14:", "tolerance.rtol", "lots"}},
		{"dtype: bf16", "dtype: f99", {":11:", "inputs[1].dtype", "f99"}},
		{"name: t\n", "name: t\nnmae: x\n", {":3:", "unknown key 'nmae'", NULL}},
		{"{C: 1}", "{Q: 1}", {":8:", "'Q' is not a declared dimension", NULL}},
		{"(C+1)/2", "(C+1)/0", {"division by zero", "output 'y'", NULL}},
		{"(C+1)/2", "(C-9)", {"outside [1, 2^32]", NULL, NULL}},
		{"  nominal: {R: 4, C: 5}\n", "", {"'nominal' shape set is required", NULL, NULL}},
		{"{c: ref.c}", "{c: missing.c}", {":16:", "reference.c", "missing.c"}},
		{"role: weight", "role: wieght", {":11:", "inputs[1].role", "statistic or variance"}},
		{"shape: [R, C]}", "shape: R}", {":10:", "inputs[0].shape", "expected a list"}},
		{"kgate_task: 1", "kgate_task: 2", {":1:", "kgate_task", "outside"}},
		{"dims: [R, C]", "dims: [R, C", {"YAML syntax error", NULL, NULL}},
		{"{R: 2, C: 3}", "{R: -2, C: 3}", {":5:", "shapes.ci.R", NULL}},
		{"[identity]", "[idenity]", {":17:", "unknown class 'idenity'", NULL}},
		{"bytes: 8*R*C", "bytes: 8*R*X", {"cost.bytes", "unknown dimension 'X'", NULL}},
		{"shape: [R, (C+1)/2]}", "shape: [R, C], reduction: C-5}", {"output 'y'", "reduction", "outside [1, 2^40]"}},
		{"shape: [R, (C+1)/2]}", "shape: [R, C], reduction: K}", {"output 'y'", "unknown dimension 'K'", NULL}},
		{"shape: [R, C]}", "shape: [R, C], reduction: C}", {":10:", "inputs[0].reduction", "only outputs"}},
		{"shape: [R, C]}", "shape: [R, C], terms: abs_inputs}", {":10:", "inputs[0].terms", "only an output"}},
		{"shape: [R, (C+1)/2]}", "shape: [R, C], terms: abs_inputs}", {":13:", "outputs[0].terms", "with a reduction"}},
		{"shape: [R, (C+1)/2]}", "shape: [R, C], reduction: C, terms: abs}", {":13:", "abs_inputs and reference", NULL}},
		{"y, dtype: f32, shape: [R, (C+1)/2]}", "y, dtype: i32, shape: [R, C], reduction: C, terms: abs_inputs}",
		 {":13:", "integer output", NULL}},
		{"shape: [R, (C+1)/2]}", "shape: [R, C], factor: row}", {":13:", "outputs[0].factor", "with a reduction"}},
		{"shape: [R, (C+1)/2]}", "shape: [R, C], reduction: C, factor: col}", {":13:", "value is row", NULL}},
		{"shape: [R, C]}", "shape: [R, C], factor: row}", {":10:", "inputs[0].factor", "only a float output"}},
		/* a variant that changes nothing over some shape set (here ci) is no coverage */
		{"{C: 1}", "{R: 2, C: 3}", {"variants[0]", "equals shape set 'ci'", NULL}},
		{"  - {C: 1}\n", "  - {C: 1}\nrandom_shapes: {count: 2, ranges: {C: [1, 31]}}\n",
		 {"random_shapes.ranges.C", "fewer than 32", NULL}},
		{"  - {C: 1}\n", "  - {C: 1}\nrandom_shapes: {count: 2, ranges: {Z: [1, 64]}}\n",
		 {"random_shapes.ranges", "'Z' is not a declared dimension", NULL}},
		/* a module's constants: a literal of its type, at a distinct argument position */
		{"exclude_classes", "constants: [{name: s, at: 1, type: float, value: lots}]\nexclude_classes",
		 {"constants[0].value", "not a finite float literal", NULL}},
		{"exclude_classes", "constants: [{name: s, at: 1, type: float, value: inf}]\nexclude_classes",
		 {"constants[0].value", NULL, NULL}},
		{"exclude_classes", "constants: [{name: s, at: 1, type: int, value: 2.5}]\nexclude_classes",
		 {"not a finite int literal", NULL, NULL}},
		{"exclude_classes", "constants: [{name: s, at: 1, type: str, value: a}]\nexclude_classes",
		 {"int, float or bool", NULL, NULL}},
		{"exclude_classes", "constants: [{name: s, at: 3, type: int, value: 2}]\nexclude_classes",
		 {"constants[0].at", NULL, NULL}},
		{"exclude_classes",
		 "constants: [{name: s, at: 1, type: int, value: 2}, {name: u, at: 1, type: int, value: 3}]\nexclude_classes",
		 {"both argument 1", NULL, NULL}},
		{"shape: [R, C]}", "shape: [R, C, R, C, R, C, R, C, R]}", {"inputs[0].shape", "between 0 and 8", NULL}},
		{"  - {C: 1}\n", "  - {C: 1}\nrandom_shapes: {count: 9, ranges: {C: [1, 64]}}\n",
		 {"random_shapes.count", NULL, NULL}},
		{"  - {C: 1}\n", "  - {C: 1}\nrandom_shapes: {count: 2, ranges: {C: [1, 40], C: [1, 50]}}\n",
		 {"random_shapes.ranges", NULL, NULL}},
		/* a torch baseline: a file of the task's own directory, under its one key */
		{"reference: {c: ref.c}\n", "reference: {c: ref.c}\nbaseline: {torch: nothere.py}\n",
		 {":17:", "baseline.torch", "nothere.py"}},
		{"reference: {c: ref.c}\n", "reference: {c: ref.c}\nbaseline: {torch: ../ref.c}\n",
		 {":17:", "baseline.torch", "without '..'"}},
		{"reference: {c: ref.c}\n", "reference: {c: ref.c}\nbaseline: {cuda: ref.c}\n",
		 {"unknown key 'cuda' in 'baseline'", NULL, NULL}},
	};
	struct kg_task *t = malloc(sizeof(*t));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char text[4096];
		const char *at = strstr(good, cases[i].from);
		assert_non_null(at);
		snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good), good, cases[i].to, at + strlen(cases[i].from));
		kg_error e;
		int rc = load_text(text, t, &e);
		if (rc == 0)
			fail_msg("case %zu loaded but should not", i);
		assert_non_null(strstr(e.msg, "task.yaml"));
		for (int k = 0; k < 3 && cases[i].expect[k]; k++)
			if (!strstr(e.msg, cases[i].expect[k]))
				fail_msg("case %zu: '%s' not in: %s", i, cases[i].expect[k], e.msg);
	}
	free(t);
}

/* What a KernelBench module maps to: a scalar (shape []: ndim 0, one element), a bool mask, the
 * forward's numbers as constants, a module with no dims at all, and a whole model's tensors (far more
 * than a command record ever held). */
static void test_module_shapes(void **state)
{
	(void)state;
	struct kg_task *t = malloc(sizeof(*t));
	kg_error e;
	const char *scalar = "kgate_task: 1\nname: s\ndims: []\nshapes: {nominal: {}}\n"
			     "inputs:\n  - {name: x, dtype: f32, shape: [8]}\n  - {name: m, dtype: bool, shape: [8]}\n"
			     "  - {name: steps, dtype: i64, shape: [], role: weight}\n"
			     "outputs:\n  - {name: y, dtype: f32, shape: [], reduction: 8}\n  - {name: b, dtype: bool, shape: [8]}\n"
			     "constants:\n  - {name: s, at: 1, type: float, value: 3.14}\n"
			     "  - {name: k, at: 4, type: int, value: -2}\n  - {name: f, at: 0, type: bool, value: true}\n"
			     "tolerance: {atol: 1e-5, rtol: 1e-4}\nreference: {c: ref.c}\n";
	if (load_text(scalar, t, &e))
		fail_msg("%s", e.msg);
	assert_int_equal(t->n_dims, 0);
	assert_int_equal(t->inputs[2].ndim, 0);
	assert_int_equal(t->outputs[0].ndim, 0);
	assert_int_equal(t->inputs[1].dtype, KG_BOOL);
	assert_int_equal(t->outputs[1].dtype, KG_BOOL);
	int64_t shape[KG_MAX_DIMS];
	assert_int_equal(kg_task_shape(&t->outputs[0], &t->shapesets[0].dims, shape, &e), 0);
	assert_int_equal(kg_shape_numel(0, shape), 1);
	assert_int_equal(t->n_consts, 3);
	assert_string_equal(t->consts[0].name, "s");
	assert_int_equal(t->consts[0].at, 1);
	assert_int_equal(t->consts[0].type, 'f');
	assert_string_equal(t->consts[0].value, "3.14");
	assert_int_equal(t->consts[1].type, 'i');
	assert_int_equal(t->consts[2].type, 'b');
	/* 700 inputs: a whole model's parameters and buffers */
	size_t cap = 1u << 17, n = 0;
	char *big = malloc(cap);
	assert_non_null(big);
	n += (size_t)snprintf(big + n, cap - n, "kgate_task: 1\nname: big\ndims: [N]\nshapes: {nominal: {N: 4}}\ninputs:\n");
	for (int i = 0; i < 700; i++)
		n += (size_t)snprintf(big + n, cap - n, "  - {name: w%d, dtype: f32, shape: [N, %d], role: weight}\n", i, i + 1);
	n += (size_t)snprintf(big + n, cap - n, "outputs:\n  - {name: y, dtype: f32, shape: [N]}\n"
						 "tolerance: {atol: 1e-5, rtol: 1e-4}\nreference: {c: ref.c}\n");
	if (load_text(big, t, &e))
		fail_msg("%s", e.msg);
	assert_int_equal(t->n_inputs, 700);
	assert_string_equal(t->inputs[699].name, "w699");
	free(big);
	free(t);
}

/* `baseline: {torch: FILE}`: the task directory's file, as a path kgate opens; none: "" */
static void test_baseline(void **state)
{
	(void)state;
	struct kg_task *t = malloc(sizeof(*t));
	kg_error e;
	assert_int_equal(load_text(good, t, &e), 0);
	assert_string_equal(t->baseline_torch, "");
	char text[4096];
	snprintf(text, sizeof(text), "%sbaseline: {torch: ref.c}\n", good);
	assert_int_equal(load_text(text, t, &e), 0);
	char want[300];
	snprintf(want, sizeof(want), "%s/ref.c", dir);
	assert_string_equal(t->baseline_torch, want);
	free(t);
}

static void test_garbage_never_crashes(void **state)
{
	(void)state;
	static const char *inputs[] = {
		"", "---\n", "[]", "- a\n- b\n", "kgate_task: [1]\n", "{{{{", "name: *alias\n",
		"a: &x [*x]\n", "kgate_task: 1\nname: {a: b}\n", "\x00\x01\x02", "kgate_task: 1\ndims: []\n",
	};
	struct kg_task *t = malloc(sizeof(*t));
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		kg_error e;
		assert_int_not_equal(load_text(inputs[i], t, &e), 0);
		assert_true(strlen(e.msg) > 0);
	}
	free(t);
}

static void test_shipped_tasks(void **state)
{
	(void)state;
	const char *names[] = {"softmax", "layernorm", "matmul", "conv_relu_pool"};
	struct kg_task *t = malloc(sizeof(*t));
	const char *home = getenv("KGATE_HOME");
	for (size_t i = 0; i < 4; i++) {
		char p[512];
		snprintf(p, sizeof(p), "%s/tasks/%s/task.yaml", home ? home : ".", names[i]);
		kg_error e = {0};
		if (kg_task_load(p, t, &e))
			fail_msg("%s: %s", names[i], e.msg);
		assert_non_null(kg_task_shapeset(t, "ci"));
		assert_true(t->cost_bytes[0] && t->cost_flops[0]);
		/* each names the torch module its candidates' speed is quoted against */
		assert_non_null(strstr(t->baseline_torch, "/baseline.py"));
		assert_int_equal(access(t->baseline_torch, R_OK), 0);
	}
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_baseline),
		cmocka_unit_test(test_module_shapes),
		cmocka_unit_test(test_garbage_never_crashes),
		cmocka_unit_test(test_shipped_tasks),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
