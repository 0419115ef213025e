/* Unit tests of kg_ufile (common/ufile.c): a user's file is read only when it is a regular,
 * non-empty file under the cap reached without any symbolic link; every refusal is its own errno
 * with a message that names the path, never the content; a FIFO is refused at once. Each case
 * runs through openat2 and through the component walk older kernels take. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kg_common.h"
#include "kg_ufile.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kgate-test-ufile-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char p[256], q[256];
	kg_error e = {0};
	snprintf(p, sizeof(p), "%s/real.c", dir);
	kg_write_file(p, "SECRET LINE\n", 12, 0644, &e);
	snprintf(p, sizeof(p), "%s/empty.c", dir);
	kg_write_file(p, "", 0, 0644, &e);
	snprintf(p, sizeof(p), "%s/big.c", dir);
	kg_write_file(p, "0123456789abcdef0123", 20, 0644, &e);
	snprintf(p, sizeof(p), "%s/link.c", dir);
	snprintf(q, sizeof(q), "%s/real.c", dir);
	if (symlink(q, p))
		return -1;
	snprintf(p, sizeof(p), "%s/sub", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/sub/inner.c", dir);
	kg_write_file(p, "inner\n", 6, 0644, &e);
	snprintf(p, sizeof(p), "%s/dirlink", dir);
	if (symlink("sub", p))
		return -1;
	snprintf(p, sizeof(p), "%s/fifo.c", dir);
	return mkfifo(p, 0644);
}

static int teardown(void **state)
{
	(void)state;
	kg_ufile_force_walk(0);
	return kg_rmtree(dir);
}

static int read_one(const char *name, size_t max, kg_error *e)
{
	char p[256];
	struct kg_ufile f;
	if (name[0] == '/')
		snprintf(p, sizeof(p), "%s", name);
	else
		snprintf(p, sizeof(p), "%s/%s", dir, name);
	memset(e, 0, sizeof(*e));
	int rc = kg_ufile_read(p, "candidate", max, &f, e);
	if (!rc) {
		assert_non_null(f.data);
		kg_ufile_free(&f);
	} else {
		/* a refusal names the file and never carries its content */
		assert_non_null(strstr(e->msg, "candidate "));
		assert_null(strstr(e->msg, "SECRET"));
	}
	return rc;
}

static void cases(void)
{
	kg_error e;
	struct kg_ufile f;
	char p[256];
	snprintf(p, sizeof(p), "%s/real.c", dir);
	assert_int_equal(kg_ufile_read(p, "candidate", 1024, &f, &e), 0);
	assert_int_equal(f.len, 12);
	assert_string_equal(f.data, "SECRET LINE\n");
	assert_int_equal(f.owned, 1);
	kg_ufile_free(&f);
	assert_int_equal(read_one("sub/inner.c", 1024, &e), 0);

	assert_int_equal(read_one("link.c", 1024, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "symbolic link"));
	assert_int_equal(read_one("dirlink/inner.c", 1024, &e), -ELOOP);
	assert_int_equal(read_one("sub", 1024, &e), -EISDIR);
	assert_int_equal(read_one("empty.c", 1024, &e), -ENODATA);
	assert_non_null(strstr(e.msg, "empty"));
	assert_int_equal(read_one("big.c", 10, &e), -EFBIG);
	assert_int_equal(read_one("missing.c", 1024, &e), -ENOENT);
	assert_int_equal(read_one("/dev/null", 1024, &e), -ENXIO);
	assert_non_null(strstr(e.msg, "device"));
	/* no writer: a blocking open would hang forever */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(read_one("fifo.c", 1024, &e), -ENXIO);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 2);
	assert_non_null(strstr(e.msg, "FIFO"));
}

static void test_openat2(void **state)
{
	(void)state;
	kg_ufile_force_walk(0);
	cases();
}

static void test_walk(void **state)
{
	(void)state;
	kg_ufile_force_walk(1);
	cases();
	kg_ufile_force_walk(0);
}

static void test_redact(void **state)
{
	(void)state;
	kg_error e = {0};
	kg_err(&e, -EINVAL, "/x/p.yaml:3: unknown key 'root:$6$hash' in 'policy'");
	kg_ufile_redact(1, "/x/p.yaml", &e);
	assert_non_null(strstr(e.msg, "root:$6$hash")); /* the user's own file: the line is theirs */
	kg_ufile_redact(0, "/x/p.yaml", &e);
	assert_null(strstr(e.msg, "root"));
	assert_non_null(strstr(e.msg, "/x/p.yaml:3:"));
	kg_err(&e, -EINVAL, "/x/p.yaml: field 'x': got 'secret'");
	kg_ufile_redact(0, "/x/p.yaml", &e);
	assert_null(strstr(e.msg, "secret"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openat2),
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_redact),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
