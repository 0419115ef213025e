/* Unit tests of the paged arena: layout (every tensor ends at a page edge), the inputs' memfd
 * sealed so that no other mapping can write it while ours still can, keyed canary words, and the
 * naming of a fault from a runner's fault line against the trusted layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runner/arena.h"
#include "verifier/arena.h"
#include "verifier/fault.h"

struct fx {
	struct kg_arena a;
};

static int setup(void **state)
{
	static struct fx f;
	kg_error e = {0};
	uint64_t bytes[2] = {1000 * 4, 777 * 4};
	size_t in, out;
	kg_arena_paged_size_for(bytes, 1, 1, &in, &out);
	assert_int_equal(kg_arena_create_paged(&f.a, in, out, &e), 0);
	kg_key ck = {{1}}, pk = {{2}};
	kg_arena_set_keys(&f.a, &ck, &pk);
	kg_dtype dt[2] = {KG_F32, KG_F32};
	int nd[2] = {1, 1};
	int64_t shp[2][KG_MAX_DIMS] = {{1000}, {777}};
	assert_int_equal(kg_arena_layout(&f.a, 1, 1, dt, nd, (const int64_t(*)[KG_MAX_DIMS])shp, &e), 0);
	kg_arena_canary_fill(&f.a, 9);
	kg_arena_poison(&f.a, 9);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	kg_arena_destroy(&f->a);
	return 0;
}

static void test_layout(void **state)
{
	struct fx *f = *state;
	const struct kg_arena *a = &f->a;
	assert_true(a->paged);
	for (int i = 0; i < 2; i++) {
		assert_int_equal((a->slot[i].off + a->slot[i].bytes) % KG_ARENA_PAGE, 0);
		assert_int_equal(a->slot[i].off % 4, 0);
	}
	assert_true(a->slot[0].off >= KG_ARENA_PAGE); /* a guard page in front of the first input */
	assert_true(a->slot[0].off + a->slot[0].bytes + KG_ARENA_PAGE <= a->in_cap);
	assert_true(a->slot[1].off >= a->in_cap);
	assert_true(a->used >= a->slot[1].off + a->slot[1].bytes + KG_ARENA_PAGE);
}

static void test_inputs_sealed(void **state)
{
	struct fx *f = *state;
	int fd = f->a.fd_in;
	/* our own mapping still writes */
	memset(kg_arena_ptr(&f->a, 0), 0x5a, f->a.slot[0].bytes);
	/* nobody else can: no writable shared mapping, no write(2), no upgrade of a read-only one */
	assert_true(mmap(NULL, KG_ARENA_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
	char c = 1;
	assert_int_equal(pwrite(fd, &c, 1, 0), -1);
	void *ro = mmap(NULL, KG_ARENA_PAGE, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(ro != MAP_FAILED);
	assert_int_equal(mprotect(ro, KG_ARENA_PAGE, PROT_READ | PROT_WRITE), -1);
	assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, KG_ARENA_PAGE), -1);
	munmap(ro, KG_ARENA_PAGE);
	/* a re-open through /proc is the same sealed file */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int fd2 = open(path, O_RDWR);
	if (fd2 >= 0) {
		assert_int_equal(pwrite(fd2, &c, 1, 0), -1);
		close(fd2);
	}
	/* the outputs' file stays writable (the runner maps it read-write) */
	void *rw = mmap(NULL, KG_ARENA_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, f->a.fd, 0);
	assert_true(rw != MAP_FAILED);
	munmap(rw, KG_ARENA_PAGE);
}

static void test_keyed_canaries(void **state)
{
	struct fx *f = *state;
	struct kg_arena *a = &f->a;
	int slot, side;
	uint64_t dist;
	assert_int_equal(kg_arena_canary_check(a, &slot, &side, &dist), 0);
	uint64_t w9, w10;
	memcpy(&w9, (char *)kg_arena_ptr(a, 0) - 8, 8);
	kg_arena_canary_fill(a, 10);
	memcpy(&w10, (char *)kg_arena_ptr(a, 0) - 8, 8);
	assert_true(w9 != w10);
	/* a byte in front of the output (its page's canary words) */
	unsigned char *out = kg_arena_ptr(a, 1);
	out[-3] ^= 0x40;
	assert_int_equal(kg_arena_canary_check(a, &slot, &side, &dist), 1);
	assert_int_equal(slot, 1);
	assert_int_equal(side, -1);
	assert_int_equal(dist, 2);
	out[-3] ^= 0x40;
	/* a byte right after the input is on its guard page, which the runner never maps (the
	 * hardware faults any access there): no band, never written or read back. Filling such pages
	 * cost a gigabyte a call at softmax's nominal size, the input region's whole capacity at a
	 * small variant shape. */
	unsigned char *in = kg_arena_ptr(a, 0);
	in[a->slot[0].bytes] ^= 1;
	assert_int_equal(kg_arena_canary_check(a, &slot, &side, &dist), 0);
	in[a->slot[0].bytes] ^= 1;
}

static struct kg_sb_outcome crash(const char *out)
{
	struct kg_sb_outcome o = {.end = KG_SB_END_SIGNAL, .signo = SIGSEGV, .output = out, .output_len = strlen(out)};
	return o;
}

static void test_fault_names(void **state)
{
	struct fx *f = *state;
	const struct kg_arena *a = &f->a;
	struct kg_fault ft;
	char line[160];
	/* a store into the input's element 10 */
	snprintf(line, sizeof(line), "noise\n" KG_RARENA_FAULT_TAG "0x%llx\n",
		 (unsigned long long)(a->slot[0].off + 40));
	struct kg_sb_outcome o = crash(line);
	assert_int_equal(kg_fault_name(a, &o, &ft), 1);
	assert_int_equal(ft.code, KG_R_CHECK_INPUT_MODIFIED);
	assert_int_equal(ft.slot, 0);
	assert_int_equal(ft.index, 10);
	/* one element past the output's end: its guard page */
	snprintf(line, sizeof(line), KG_RARENA_FAULT_TAG "0x%llx\n",
		 (unsigned long long)(a->slot[1].off + a->slot[1].bytes));
	o = crash(line);
	assert_int_equal(kg_fault_name(a, &o, &ft), 1);
	assert_int_equal(ft.code, KG_R_CHECK_CANARY);
	assert_int_equal(ft.slot, 1);
	/* a claim on a page that is writable there cannot be a fault: a plain crash */
	snprintf(line, sizeof(line), KG_RARENA_FAULT_TAG "0x%llx\n", (unsigned long long)(a->slot[1].off + 8));
	o = crash(line);
	assert_int_equal(kg_fault_name(a, &o, &ft), 0);
	/* no line, or not a fault signal: nothing to name */
	o = crash("nothing here");
	assert_int_equal(kg_fault_name(a, &o, &ft), 0);
	snprintf(line, sizeof(line), KG_RARENA_FAULT_TAG "0x%llx\n", (unsigned long long)(a->slot[0].off));
	o = crash(line);
	o.signo = SIGKILL;
	assert_int_equal(kg_fault_name(a, &o, &ft), 0);
	/* the last line counts (the runner writes it right before dying) */
	uint64_t off;
	const char *two = KG_RARENA_FAULT_TAG "0x10\n" KG_RARENA_FAULT_TAG "0xabc\n";
	assert_int_equal(kg_fault_line(two, strlen(two), &off), 1);
	assert_int_equal(off, 0xabc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inputs_sealed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keyed_canaries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_names, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
