/* Unit tests of the paged arena: layout (every tensor ends at a page edge, one region per shape),
 * the inputs' memfd sealed so that no other mapping can write it while ours still can, keyed
 * canary words, streaming writes that keep every byte, and the runner's side: laid out from the
 * page map at start and sealed, so that no guard page can be opened, unmapped or mapped over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/arena.h"
#include "sandbox/sandbox.h"
#include "verifier/arena/arena.h"

struct fx {
	struct kg_arena a;
};

static const kg_dtype dt2[2] = {KG_F32, KG_F32};
static const int nd2[2] = {1, 1};

/* Two shapes: 1000 -> 777 elements, then 300 -> 5000. */
static int setup(void **state)
{
	static struct fx f;
	kg_error e = {0};
	uint64_t bytes[2][2] = {{1000 * 4, 777 * 4}, {300 * 4, 5000 * 4}};
	size_t in[2], out[2];
	for (int r = 0; r < 2; r++)
		kg_arena_paged_size_for(bytes[r], 1, 1, &in[r], &out[r]);
	assert_int_equal(kg_arena_create_paged(&f.a, 2, in, out, &e), 0);
	kg_key ck = {{1}}, pk = {{2}};
	kg_arena_set_keys(&f.a, &ck, &pk);
	int64_t shp[2][2][KG_MAX_DIMS] = {{{1000}, {777}}, {{300}, {5000}}};
	for (int r = 0; r < 2; r++) {
		assert_int_equal(kg_arena_layout(&f.a, r, r, 1, 1, dt2, nd2, (const int64_t(*)[KG_MAX_DIMS])shp[r], &e), 0);
		assert_int_equal(kg_arena_table_add(&f.a, &e), 0);
		assert_int_equal(kg_arena_map_region(&f.a, &e), 0);
	}
	/* tables go in the order of their numbers */
	assert_int_equal(kg_arena_table_add(&f.a, &e), -EINVAL);
	assert_int_equal(kg_arena_map_seal(&f.a, &e), 0);
	assert_int_equal(kg_arena_tables_seal(&f.a, &e), 0);
	/* region 0 current */
	assert_int_equal(kg_arena_layout(&f.a, 0, 0, 1, 1, dt2, nd2, (const int64_t(*)[KG_MAX_DIMS])shp[0], &e), 0);
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

static void test_regions(void **state)
{
	struct fx *f = *state;
	struct kg_arena *a = &f->a;
	kg_error e = {0};
	/* region 0 is current (laid out last); region 1's tensors lie wholly after region 0's in each
	 * file, each with an inaccessible page after it */
	uint64_t in0 = a->slot[0].off, out0 = a->slot[1].off;
	int64_t shp[2][KG_MAX_DIMS] = {{300}, {5000}};
	assert_int_equal(kg_arena_layout(a, 1, 1, 1, 1, dt2, nd2, (const int64_t(*)[KG_MAX_DIMS])shp, &e), 0);
	assert_true(a->slot[0].off > in0 + 4000);
	assert_true(a->slot[0].off + a->slot[0].bytes + KG_ARENA_PAGE <= a->in_cap);
	assert_true(a->slot[1].off > out0 + 777 * 4);
	assert_int_equal((a->slot[1].off + a->slot[1].bytes) % KG_ARENA_PAGE, 0);
	assert_int_equal(kg_arena_layout(a, 2, 2, 1, 1, dt2, nd2, (const int64_t(*)[KG_MAX_DIMS])shp, &e), -EINVAL);
	/* the page map: four tensor ranges, page-aligned, sealed against any change */
	struct kg_wire_pagemap h;
	assert_int_equal(pread(a->fd_map, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	assert_int_equal(h.magic, KG_WIRE_MAGIC);
	assert_int_equal(h.count, 4);
	struct kg_wire_range r[4];
	assert_int_equal(pread(a->fd_map, r, sizeof(r), sizeof(h)), (ssize_t)sizeof(r));
	for (int i = 0; i < 4; i++) {
		assert_int_equal(r[i].lo % KG_ARENA_PAGE, 0);
		assert_int_equal(r[i].hi % KG_ARENA_PAGE, 0);
		assert_true(r[i].lo < r[i].hi);
	}
	char c = 0;
	assert_int_equal(pwrite(a->fd_map, &c, 1, 0), -1);
}

/* The tensor tables the runners get at start: each shape's layout as the runner reads it, the file
 * sealed against any change (what SETUP names cannot be rewritten under the runner). */
static void test_tables(void **state)
{
	struct fx *f = *state;
	struct kg_arena *a = &f->a;
	struct stat st;
	assert_int_equal(fstat(a->fd_tables, &st), 0);
	unsigned char *buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(pread(a->fd_tables, buf, (size_t)st.st_size, 0), st.st_size);
	char err[200];
	const struct kg_wire_tensor *t = NULL;
	assert_int_equal(kg_wire_table_get(buf, (size_t)st.st_size, 0, 1, 1, a->capacity, &t, err, sizeof(err)), 0);
	/* table 0 is region 0's layout, the current one */
	assert_int_equal(t[0].offset, a->slot[0].off);
	assert_int_equal(t[1].offset, a->slot[1].off);
	assert_int_equal(t[0].shape[0], 1000);
	assert_int_equal(t[1].shape[0], 777);
	assert_int_equal(kg_wire_table_get(buf, (size_t)st.st_size, 1, 1, 1, a->capacity, &t, err, sizeof(err)), 0);
	assert_int_equal(t[0].shape[0], 300);
	assert_int_equal(t[1].shape[0], 5000);
	assert_int_equal(t[1].dtype, KG_F32);
	assert_int_equal(kg_wire_table_get(buf, (size_t)st.st_size, 2, 1, 1, a->capacity, &t, err, sizeof(err)), -1);
	free(buf);
	char c = 0;
	assert_int_equal(pwrite(a->fd_tables, &c, 1, 0), -1);
	assert_int_equal(ftruncate(a->fd_tables, 0), -1);
}

/* A bool output's poison is never 0 or 1: no element a kernel wrote looks unwritten. */
static void test_bool_poison(void **state)
{
	(void)state;
	struct kg_arena a;
	kg_error e = {0};
	const kg_dtype dt[2] = {KG_F32, KG_BOOL};
	const int nd[2] = {1, 1};
	const int64_t shp[2][KG_MAX_DIMS] = {{16}, {4096}};
	uint64_t bytes[2] = {64, 4096};
	assert_int_equal(kg_arena_create(&a, kg_arena_size_for(bytes, 2), &e), 0);
	kg_key ck = {{3}}, pk = {{4}};
	kg_arena_set_keys(&a, &ck, &pk);
	assert_int_equal(kg_arena_layout(&a, 0, 0, 1, 1, dt, nd, shp, &e), 0);
	unsigned seen[256] = {0};
	for (uint64_t id = 0; id < 2000; id++) {
		kg_arena_poison(&a, id);
		const unsigned char *o = kg_arena_ptr(&a, 1);
		assert_true(o[0] > 1);
		assert_int_equal(o[4095], o[0]);
		seen[o[0]]++;
		/* a kernel's all-true or all-false output is written in full */
		unsigned char tru[4096];
		memset(tru, (int)(id & 1), sizeof(tru));
		memcpy(kg_arena_ptr(&a, 1), tru, sizeof(tru));
		assert_int_equal(kg_arena_unwritten(&a, 1, NULL), -1);
	}
	int kinds = 0;
	for (int i = 0; i < 256; i++)
		kinds += seen[i] > 0;
	assert_true(kinds > 100); /* keyed, not one fixed byte */
	kg_arena_destroy(&a);
}

static void test_streaming(void **state)
{
	struct fx *f = *state;
	struct kg_arena *a = &f->a;
	float src[1000];
	for (int i = 0; i < 1000; i++)
		src[i] = (float)i * 0.5f - 7.0f;
	kg_arena_put(a, 0, src);
	assert_memory_equal(kg_arena_ptr(a, 0), src, sizeof(src));
	/* the poison: every element the same keyed NaN, head and tail of an unaligned start too */
	uint32_t w0, w;
	const unsigned char *o = kg_arena_ptr(a, 1);
	memcpy(&w0, o, 4);
	assert_true((w0 & 0x7fc00000u) == 0x7fc00000u);
	for (int i = 0; i < 777; i++) {
		memcpy(&w, o + 4 * i, 4);
		assert_int_equal(w, w0);
	}
	assert_int_equal(kg_arena_unwritten(a, 1, NULL), 0);
	int slot, side;
	uint64_t dist;
	assert_int_equal(kg_arena_canary_check(a, &slot, &side, &dist), 0);
}

/* A runner whose arena is not paged (a tool's exact buffers) gets the tensor tables at fd 5, the
 * number a paged arena's inputs take: that file is no arena of inputs (the sanitizer runs on the
 * H100 asked for a page map on fd 6 and were not verified). */
static void test_runner_tables_at_five(void **state)
{
	struct fx *f = *state;
	struct kg_arena *a = &f->a;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		int fo = fcntl(a->fd, F_DUPFD, 100), ft = fcntl(a->fd_in, F_DUPFD, 100);
		if (fo < 0 || ft < 0 || dup2(fo, KG_WIRE_ARENA_FD) < 0 || dup2(ft, KG_WIRE_INPUT_FD) < 0)
			_exit(10);
		close(KG_WIRE_MAP_FD);
		struct kg_rarena ra;
		char err[300];
		if (kg_rarena_map(&ra, KG_WIRE_INPUT_FD, err, sizeof(err))) {
			fprintf(stderr, "%s\n", err);
			_exit(11);
		}
		_exit(ra.paged ? 12 : 0);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* The runner's side, in a child with the arena's fds where kgate-run finds them: it maps the page
 * map's tensor pages, and with mseal the whole range is sealed: no call can open a guard page. */
static void test_runner_sealed(void **state)
{
	struct fx *f = *state;
	struct kg_arena *a = &f->a;
	int have_mseal = syscall(462, 0UL, 0UL, 0UL) == 0;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		/* out of the way first: the arena's own fds may be any of 4..6 */
		int fo = fcntl(a->fd, F_DUPFD, 100), fi = fcntl(a->fd_in, F_DUPFD, 100), fm = fcntl(a->fd_map, F_DUPFD, 100);
		if (fo < 0 || fi < 0 || fm < 0 || dup2(fo, KG_WIRE_ARENA_FD) < 0 || dup2(fi, KG_WIRE_INPUT_FD) < 0 ||
		    dup2(fm, KG_WIRE_MAP_FD) < 0)
			_exit(10);
		setenv(KG_SB_ENV_MSEAL, have_mseal ? "1" : "0", 1);
		struct kg_rarena ra;
		char err[300];
		if (kg_rarena_map(&ra, 7, err, sizeof(err))) {
			fprintf(stderr, "%s\n", err);
			_exit(11);
		}
		if (!ra.paged || ra.n_ranges != 4)
			_exit(12);
		/* region 0's input reads what the parent wrote; its output page writes */
		if (memcmp(ra.base + a->slot[0].off, kg_arena_ptr(a, 0), 16))
			_exit(13);
		ra.base[a->slot[1].off] = 1;
		unsigned char *guard = ra.base + a->slot[1].off + a->slot[1].bytes;
		if (have_mseal) {
			if (!mprotect(guard, 4096, PROT_READ | PROT_WRITE) || errno != EPERM)
				_exit(14);
			if (!munmap(guard, 4096) || errno != EPERM)
				_exit(15);
			if (mmap(guard, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
				    MAP_FAILED ||
			    errno != EPERM)
				_exit(16);
			/* an input cannot be made writable either */
			if (!mprotect(ra.base + (a->slot[0].off & ~4095ull), 4096, PROT_READ | PROT_WRITE))
				_exit(17);
		}
		/* a tensor outside the laid-out pages is refused at SETUP */
		struct kg_wire_tensor t = {.offset = a->in_cap - 8, .dtype = KG_F32, .ndim = 1, .shape = {4}};
		if (!kg_rarena_check(&ra, &t, 1, err, sizeof(err)))
			_exit(18);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* the runner's write reached the shared file */
	assert_int_equal(((unsigned char *)kg_arena_ptr(a, 1))[0], 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inputs_sealed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keyed_canaries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_regions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tables, setup, teardown),
		cmocka_unit_test(test_bool_poison),
		cmocka_unit_test_setup_teardown(test_streaming, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runner_tables_at_five, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runner_sealed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
