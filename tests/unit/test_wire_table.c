/* The runner's reading of the tensor tables (runner/table.c): the file is data the runner checks
 * before any entry becomes a pointer the candidate is handed. Forged headers, counts, offsets and
 * shapes are refused; a whole model's table (hundreds of tensors) and scalars pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/wire.h"

#define ARENA (1ull << 30)

/* torch_runner.py packs the command record as CMD ("<IIQQIIIIII512sIIQII"): 584 bytes */
_Static_assert(sizeof(struct kg_wire_cmd) == 584, "runner/torch_runner.py's CMD follows struct kg_wire_cmd");

/* A tables file of one table: n_in inputs and n_out outputs of f32[4] each, 4096 bytes apart. */
struct file {
	unsigned char *buf;
	size_t len;
};

static struct file make(uint32_t n_in, uint32_t n_out)
{
	struct kg_wire_tables h = {.magic = KG_WIRE_MAGIC, .count = 1};
	size_t at = 24, n = (size_t)n_in + n_out;
	struct file f = {.len = at + n * sizeof(struct kg_wire_tensor)};
	f.buf = calloc(1, f.len);
	assert_non_null(f.buf);
	struct kg_wire_table th = {.at = at, .n_in = n_in, .n_out = n_out};
	memcpy(f.buf, &h, sizeof(h));
	memcpy(f.buf + sizeof(h), &th, sizeof(th));
	for (size_t i = 0; i < n; i++) {
		struct kg_wire_tensor w = {.offset = 4096 * i, .dtype = KG_F32, .ndim = 1, .shape = {4}};
		memcpy(f.buf + at + i * sizeof(w), &w, sizeof(w));
	}
	return f;
}

static struct kg_wire_tensor *entry(struct file *f, size_t i)
{
	return (struct kg_wire_tensor *)(void *)(f->buf + 24 + i * sizeof(struct kg_wire_tensor));
}

static int get(struct file *f, uint32_t idx, uint32_t n_in, uint32_t n_out, char *err)
{
	const struct kg_wire_tensor *t = (const void *)1;
	int rc = kg_wire_table_get(f->buf, f->len, idx, n_in, n_out, ARENA, &t, err, 200);
	if (rc)
		assert_null(t);
	else
		assert_ptr_equal(t, f->buf + 24);
	return rc;
}

static void test_whole_model(void **state)
{
	(void)state;
	char err[200];
	/* ResNet101: 627 inputs with its parameters and buffers, one output */
	struct file f = make(627, 1);
	assert_int_equal(get(&f, 0, 627, 1, err), 0);
	/* a scalar (BatchNorm's step count, a loss), a bool mask */
	entry(&f, 5)->ndim = 0;
	entry(&f, 6)->dtype = KG_BOOL;
	entry(&f, 7)->shape[0] = 0; /* empty: zero bytes */
	assert_int_equal(get(&f, 0, 627, 1, err), 0);
	free(f.buf);
}

static void test_forged_header(void **state)
{
	(void)state;
	char err[200];
	struct file f = make(2, 1);
	/* too short for a header, no file */
	assert_int_equal(kg_wire_table_get(f.buf, 4, 0, 2, 1, ARENA, &(const struct kg_wire_tensor *){0}, err, 200), -1);
	assert_int_equal(kg_wire_table_get(NULL, 0, 0, 2, 1, ARENA, &(const struct kg_wire_tensor *){0}, err, 200), -1);
	/* a forged count: more heads than the file holds, or one that wraps */
	uint32_t count = 1000;
	memcpy(f.buf + 4, &count, 4);
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	assert_non_null(strstr(err, "header"));
	count = UINT32_MAX;
	memcpy(f.buf + 4, &count, 4);
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	count = 1;
	memcpy(f.buf + 4, &count, 4);
	/* a table SETUP names that is not there */
	assert_int_equal(get(&f, 1, 2, 1, err), -1);
	assert_int_equal(get(&f, UINT32_MAX, 2, 1, err), -1);
	/* the wrong magic */
	f.buf[0] ^= 1;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	f.buf[0] ^= 1;
	assert_int_equal(get(&f, 0, 2, 1, err), 0);
	free(f.buf);
}

static void test_forged_head(void **state)
{
	(void)state;
	char err[200];
	struct file f = make(2, 1);
	struct kg_wire_table *th = (struct kg_wire_table *)(void *)(f.buf + 8);
	/* counts other than SETUP's */
	assert_int_equal(get(&f, 0, 3, 1, err), -1);
	assert_int_equal(get(&f, 0, 2, 0, err), -1);
	/* a forged count in the head: past the file's end, or wrapping 32 bits when added */
	th->n_in = 3;
	assert_int_equal(get(&f, 0, 3, 1, err), -1);
	th->n_in = UINT32_MAX;
	th->n_out = 1;
	assert_int_equal(get(&f, 0, UINT32_MAX, 1, err), -1);
	th->n_in = 2;
	/* entries past the end, before it by a wrap, or unaligned */
	th->at = f.len;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	th->at = UINT64_MAX - 7;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	th->at = 25;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	th->at = 24;
	assert_int_equal(get(&f, 0, 2, 1, err), 0);
	free(f.buf);
}

static void test_forged_tensor(void **state)
{
	(void)state;
	char err[200];
	struct file f = make(2, 1);
	struct kg_wire_tensor *w = entry(&f, 1);
	const struct kg_wire_tensor keep = *w;
	/* a rank out of range, a negative dim, an unknown dtype */
	w->ndim = KG_MAX_DIMS + 1;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	w->ndim = -1;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	*w = keep;
	w->shape[0] = -4;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	*w = keep;
	w->dtype = KG_BOOL + 1;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	/* a shape whose product overflows 64 bits (2^32 * 2^32 * 4 bytes) */
	*w = keep;
	w->ndim = 2;
	w->shape[0] = w->shape[1] = 1ll << 32;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	/* one whose bytes pass the arena's end, by its offset or its size; one past it by one byte */
	*w = keep;
	w->offset = ARENA - 15;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	w->offset = UINT64_MAX - 3;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	*w = keep;
	w->shape[0] = (int64_t)(ARENA / 4) + 1;
	w->offset = 0;
	assert_int_equal(get(&f, 0, 2, 1, err), -1);
	assert_non_null(strstr(err, "tensor 1"));
	/* exactly at the end fits */
	w->shape[0] = 4;
	w->offset = ARENA - 16;
	assert_int_equal(get(&f, 0, 2, 1, err), 0);
	free(f.buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_model),
		cmocka_unit_test(test_forged_header),
		cmocka_unit_test(test_forged_head),
		cmocka_unit_test(test_forged_tensor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
