/* Unit tests of the compile cache (verifier/compile/cache.c) and the SHA-256 under it (common/sha256.c):
 * the published test vectors through the streaming API at every split, a key that changes with
 * each of its components, entries that are believed only when intact and the user's, a directory
 * refused when others can write it, and LRU eviction under the size bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kg_common.h"
#include "kg_sha256.h"
#include "verifier/compile/cache.h"

static char dir[64], cachedir[128], incdir[128], ccpath[128], so[128];

static void put(const char *path, const char *text)
{
	kg_error e = {0};
	assert_int_equal(kg_write_file(path, text, strlen(text), 0755, &e), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kgate-test-cache-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(cachedir, sizeof(cachedir), "%s/cache", dir);
	snprintf(incdir, sizeof(incdir), "%s/include", dir);
	snprintf(ccpath, sizeof(ccpath), "%s/cc", dir);
	snprintf(so, sizeof(so), "%s/out.so", dir);
	char p[256];
	snprintf(p, sizeof(p), "%s/kgate", incdir);
	kg_error e = {0};
	if (kg_mkdirs(p, 0755, &e))
		return -1;
	snprintf(p, sizeof(p), "%s/kgate/kernel.h", incdir);
	put(p, "#define KG_ABI_VERSION 1\n");
	put(ccpath, "#!/bin/sh\n# a stand-in compiler binary: only its bytes matter here\n");
	unsetenv("KGATE_CACHE_MAX_MB");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	kg_rmtree(dir);
	return 0;
}

/* ---- SHA-256: FIPS 180-4 / NIST CSRC example vectors ---- */

static void hex_of_stream(const char *msg, size_t len, size_t split, char out[65])
{
	kg_sha256_ctx c;
	uint8_t d[32];
	kg_sha256_init(&c);
	for (size_t off = 0; off < len; off += split)
		kg_sha256_update(&c, msg + off, len - off < split ? len - off : split);
	kg_sha256_final(&c, d);
	kg_sha256_tohex(d, out);
}

static void test_sha256_kat(void **state)
{
	(void)state;
	static const struct {
		const char *msg, *hex;
	} v[] = {
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrs"
		 "tnopqrstu",
		 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
	};
	char h[65];
	for (size_t i = 0; i < KG_ARRAY_LEN(v); i++) {
		size_t len = strlen(v[i].msg);
		kg_sha256_hex(v[i].msg, len, h);
		assert_string_equal(h, v[i].hex);
		/* every way of cutting the message into updates gives the same digest */
		for (size_t split = 1; split <= len + 1; split++) {
			hex_of_stream(v[i].msg, len, split, h);
			assert_string_equal(h, v[i].hex);
		}
	}
	char *mil = malloc(1000000);
	assert_non_null(mil);
	memset(mil, 'a', 1000000);
	hex_of_stream(mil, 1000000, 997, h);
	assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(mil);
}

/* ---- the key ---- */

static const char *argv_base[] = {NULL, "-O2", "-I/kgate/include", "-o", "/work/kernel.so", "/work/kernel.c", NULL};
static const char *envp_base[] = {"PATH=/usr/bin:/bin", "LANG=C", NULL};
static const char *mounts_base[] = {"/opt/cuda", NULL};

static void key_of(const struct kg_cache_key_in *in, uint8_t key[32])
{
	kg_error e = {0};
	assert_int_equal(kg_cache_key(in, key, &e), 0);
}

static struct kg_cache_key_in base_in(void)
{
	argv_base[0] = ccpath;
	return (struct kg_cache_key_in){
		.backend = "cpu",
		.arch = "90a",
		.argv = argv_base,
		.envp = envp_base,
		.mounts = mounts_base,
		.include_dir = incdir,
		.src = "int kg_forward(void);\n",
		.src_len = 22,
	};
}

static void test_key_components(void **state)
{
	(void)state;
	uint8_t k0[32], k[32];
	struct kg_cache_key_in in = base_in();
	key_of(&in, k0);
	key_of(&in, k);
	assert_memory_equal(k0, k, 32); /* deterministic */

	in = base_in();
	in.src = "int kg_forward(void);\t";
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32); /* one byte of the source */
	in = base_in();
	in.src_len = 21;
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32); /* its length */

	in = base_in();
	in.arch = "80";
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);
	in.arch = NULL;
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);

	in = base_in();
	in.backend = "cuda";
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);

	const char *argv2[] = {ccpath, "-O3", "-I/kgate/include", "-o", "/work/kernel.so", "/work/kernel.c", NULL};
	in = base_in();
	in.argv = argv2;
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32); /* a flag */
	const char *argv3[] = {ccpath, "-O2", "-I/kgate/include", "-o", "/work/kernel.so", "/work/kernel.c", "-lm", NULL};
	in.argv = argv3;
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32); /* one more argument */
	/* arguments keep their boundaries: "-O2" "-I..." is not "-O2-I..." */
	const char *argv4[] = {ccpath, "-O2-I/kgate/include", "-o", "/work/kernel.so", "/work/kernel.c", NULL};
	in.argv = argv4;
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);

	const char *envp2[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
	in = base_in();
	in.envp = envp2;
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);
	const char *mounts2[] = {"/opt/cuda-12.4", NULL};
	in = base_in();
	in.mounts = mounts2;
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);

	/* kgate's headers: content and the set of files */
	char p[256];
	snprintf(p, sizeof(p), "%s/kgate/kernel.h", incdir);
	put(p, "#define KG_ABI_VERSION 2\n");
	in = base_in();
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);
	put(p, "#define KG_ABI_VERSION 1\n");
	key_of(&in, k);
	assert_memory_equal(k0, k, 32);
	snprintf(p, sizeof(p), "%s/kgate/extra.h", incdir);
	put(p, "\n");
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);
	unlink(p);
	key_of(&in, k);
	assert_memory_equal(k0, k, 32);

	/* the compiler's bytes (same path, same size: only the content differs), and back; a pause
	 * first, so that the rewrite's mtime differs at the file system's timestamp granularity */
	struct timespec pause = {0, 20 * 1000 * 1000};
	nanosleep(&pause, NULL);
	put(ccpath, "#!/bin/sh\n# a stand-in compiler binary: only its bytes matter HERE\n");
	key_of(&in, k);
	assert_memory_not_equal(k0, k, 32);
	nanosleep(&pause, NULL);
	put(ccpath, "#!/bin/sh\n# a stand-in compiler binary: only its bytes matter here\n");
	key_of(&in, k);
	assert_memory_equal(k0, k, 32);

	/* no compiler, no key (and so no caching) */
	const char *argv5[] = {"/nonexistent/cc", NULL};
	in.argv = argv5;
	kg_error e = {0};
	assert_int_equal(kg_cache_key(&in, k, &e), -ENOENT);
}

/* ---- the directory ---- */

static void test_dir_checks(void **state)
{
	(void)state;
	struct kg_cache *c = NULL;
	kg_error e = {0};
	char p[256];
	snprintf(p, sizeof(p), "%s/d1", dir);
	assert_int_equal(kg_cache_open(p, &c, &e), 0);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700); /* created private */
	kg_cache_close(c);

	chmod(p, 0770);
	assert_int_equal(kg_cache_open(p, &c, &e), -EPERM);
	assert_non_null(strstr(e.msg, "group-writable"));
	chmod(p, 0707);
	assert_int_equal(kg_cache_open(p, &c, &e), -EPERM);
	assert_non_null(strstr(e.msg, "world-writable"));
	chmod(p, 0700);

	char l[256];
	snprintf(l, sizeof(l), "%s/d1-link", dir);
	assert_int_equal(symlink(p, l), 0);
	assert_int_equal(kg_cache_open(l, &c, &e), -ELOOP);

	if (geteuid() == 0) { /* another owner: only root can make one */
		assert_int_equal(chown(p, 12345, 12345), 0);
		assert_int_equal(kg_cache_open(p, &c, &e), -EPERM);
		assert_non_null(strstr(e.msg, "owned by uid 12345"));
		assert_int_equal(chown(p, 0, 0), 0);
	}

	setenv("KGATE_CACHE_MAX_MB", "0", 1);
	assert_int_equal(kg_cache_open(p, &c, &e), -ECANCELED);
	setenv("KGATE_CACHE_MAX_MB", "12x", 1);
	assert_int_equal(kg_cache_open(p, &c, &e), -EINVAL);
	unsetenv("KGATE_CACHE_MAX_MB");

	char out[4096];
	setenv("KGATE_CACHE_DIR", "/x/y", 1);
	assert_int_equal(kg_cache_dir(out, sizeof(out), &e), 0);
	assert_string_equal(out, "/x/y");
	setenv("KGATE_CACHE_DIR", "relative", 1);
	assert_int_equal(kg_cache_dir(out, sizeof(out), &e), -EINVAL);
	unsetenv("KGATE_CACHE_DIR");
	setenv("XDG_CACHE_HOME", "/xdg", 1);
	assert_int_equal(kg_cache_dir(out, sizeof(out), &e), 0);
	assert_string_equal(out, "/xdg/kgate");
	setenv("XDG_CACHE_HOME", "rel", 1); /* ignored, as the XDG spec says */
	setenv("HOME", "/home/u", 1);
	assert_int_equal(kg_cache_dir(out, sizeof(out), &e), 0);
	assert_string_equal(out, "/home/u/.cache/kgate");
	unsetenv("XDG_CACHE_HOME");
}

/* ---- entries ---- */

static void make_so(const char *text)
{
	unlink(so);
	put(so, text);
}

static void entry_path(const uint8_t key[32], char *out, size_t outsz)
{
	char hex[65];
	kg_sha256_tohex(key, hex);
	snprintf(out, outsz, "%s/compile/%s.kgc", cachedir, hex);
}

/* Looks key up into a fresh out.so; returns the hit flag, the note and the .so read back. */
static int lookup(struct kg_cache *c, const uint8_t key[32], char *log, size_t logsz, char *note, char *got)
{
	kg_error e = {0};
	unlink(so);
	int hit = kg_cache_get(c, key, so, log, logsz, note, 300, &e);
	assert_true(hit >= 0);
	got[0] = '\0';
	if (hit) {
		char *t = NULL;
		size_t n = 0;
		assert_int_equal(kg_read_file(so, 1 << 20, &t, &n, &e), 0);
		snprintf(got, 256, "%s", t);
		free(t);
	}
	return hit;
}

static void test_entry_integrity(void **state)
{
	(void)state;
	struct kg_cache *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_cache_open(cachedir, &c, &e), 0);
	uint8_t key[32], other[32];
	kg_sha256("k1", 2, key);
	kg_sha256("k2", 2, other);
	char log[256], note[300], got[256], path[512];

	assert_int_equal(lookup(c, key, log, sizeof(log), note, got), 0); /* empty: a miss */
	make_so("ELF-ish artifact bytes");
	assert_int_equal(kg_cache_put(c, key, so, "warning: unused variable 'x'\n", &e), 0);
	assert_int_equal(lookup(c, key, log, sizeof(log), note, got), 1);
	assert_string_equal(got, "ELF-ish artifact bytes");
	assert_string_equal(log, "warning: unused variable 'x'\n");
	assert_string_equal(note, "");
	struct stat st;
	assert_int_equal(stat(so, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0755);
	assert_int_equal(lookup(c, other, log, sizeof(log), note, got), 0); /* another key */
	/* a hit never overwrites an existing file (O_EXCL): the caller's scratch is fresh */
	make_so("already here");
	assert_true(kg_cache_get(c, key, so, log, sizeof(log), note, sizeof(note), &e) < 0);

	/* one flipped byte of the artifact: a miss, and the entry is gone */
	entry_path(key, path, sizeof(path));
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	off_t end = lseek(fd, 0, SEEK_END);
	char b;
	assert_int_equal(pread(fd, &b, 1, end - 3), 1);
	b ^= 1;
	assert_int_equal(pwrite(fd, &b, 1, end - 3), 1);
	close(fd);
	assert_int_equal(lookup(c, key, log, sizeof(log), note, got), 0);
	assert_non_null(strstr(note, "content hash does not match"));
	assert_int_equal(access(path, F_OK), -1);

	/* truncated (a writer that died, a full disk) */
	make_so("ELF-ish artifact bytes");
	assert_int_equal(kg_cache_put(c, key, so, "log", &e), 0);
	assert_int_equal(truncate(path, 100), 0);
	assert_int_equal(lookup(c, key, log, sizeof(log), note, got), 0);
	assert_non_null(strstr(note, "removed"));
	assert_int_equal(access(path, F_OK), -1);

	/* a valid entry of another key copied under this key's name */
	make_so("ELF-ish artifact bytes");
	assert_int_equal(kg_cache_put(c, other, so, "log", &e), 0);
	char opath[512];
	entry_path(other, opath, sizeof(opath));
	assert_int_equal(rename(opath, path), 0);
	assert_int_equal(lookup(c, key, log, sizeof(log), note, got), 0);
	assert_non_null(strstr(note, "key does not match"));

	/* writable by others: not believed */
	make_so("ELF-ish artifact bytes");
	assert_int_equal(kg_cache_put(c, key, so, "log", &e), 0);
	chmod(path, 0666);
	assert_int_equal(lookup(c, key, log, sizeof(log), note, got), 0);
	assert_non_null(strstr(note, "writable by others"));

	/* a symbolic link in the entry's place is never followed */
	char target[256];
	snprintf(target, sizeof(target), "%s/elsewhere", dir);
	put(target, "not an entry");
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(lookup(c, key, log, sizeof(log), note, got), 0);
	assert_non_null(strstr(note, "symbolic link"));
	assert_int_equal(access(target, F_OK), 0); /* the link went, not its target */

	/* the log is cut at the caller's buffer, never overrun */
	make_so("x");
	char longlog[600];
	memset(longlog, 'w', sizeof(longlog) - 1);
	longlog[sizeof(longlog) - 1] = '\0';
	assert_int_equal(kg_cache_put(c, key, so, longlog, &e), 0);
	char small[16];
	assert_int_equal(lookup(c, key, small, sizeof(small), note, got), 1);
	assert_int_equal(strlen(small), 15);
	kg_cache_close(c);
}

static void set_mtime(const uint8_t key[32], time_t t)
{
	char path[512];
	entry_path(key, path, sizeof(path));
	struct timespec ts[2] = {{t, 0}, {t, 0}};
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static int present(const uint8_t key[32])
{
	char path[512];
	entry_path(key, path, sizeof(path));
	return !access(path, F_OK);
}

static void test_eviction(void **state)
{
	(void)state;
	struct kg_cache *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_cache_open(cachedir, &c, &e), 0);
	assert_true(kg_cache_clear(c, &e) >= 0);
	uint8_t k[4][32];
	char blob[1001];
	memset(blob, 'b', 1000);
	blob[1000] = '\0';
	for (int i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "e%d", i);
		kg_sha256(name, strlen(name), k[i]);
		make_so(blob);
		assert_int_equal(kg_cache_put(c, k[i], so, "", &e), 0);
		set_mtime(k[i], 1000000 + i * 100); /* e0 oldest */
	}
	struct kg_cache_stats st;
	assert_int_equal(kg_cache_stats(c, &st, &e), 0);
	assert_int_equal(st.entries, 4);
	uint64_t one = st.bytes / 4;

	/* a hit refreshes an entry: e0, the oldest, becomes the newest */
	char log[8], note[300], got[256];
	assert_int_equal(lookup(c, k[0], log, sizeof(log), note, got), 1);
	assert_int_equal(kg_cache_evict(c, 2 * one, &st, &e), 0);
	assert_int_equal(st.evicted, 2);
	assert_int_equal(st.entries, 2);
	assert_true(present(k[0]) && !present(k[1]) && !present(k[2]) && present(k[3]));

	/* the bound holds on every store: a put beyond it evicts the least recently used */
	kg_cache_set_max(c, 4 * one + one / 2);
	make_so(blob);
	assert_int_equal(kg_cache_put(c, k[1], so, "", &e), 0);
	make_so(blob);
	assert_int_equal(kg_cache_put(c, k[2], so, "", &e), 0);
	set_mtime(k[3], 900000); /* now the least recently used */
	uint8_t k4[32];
	kg_sha256("e4", 2, k4);
	make_so(blob);
	assert_int_equal(kg_cache_put(c, k4, so, "", &e), 0);
	assert_true(present(k[0]) && present(k[1]) && present(k[2]) && !present(k[3]) && present(k4));

	/* an artifact larger than a quarter of the bound is not stored */
	kg_cache_set_max(c, 2000);
	make_so(blob);
	assert_int_equal(kg_cache_put(c, k[2], so, "", &e), -EFBIG);

	/* a writer's temporary older than an hour is collected; a fresh one is left alone */
	char tmp[512], fresh[512];
	snprintf(tmp, sizeof(tmp), "%s/compile/.tmp-1-dead", cachedir);
	snprintf(fresh, sizeof(fresh), "%s/compile/.tmp-2-live", cachedir);
	put(tmp, "partial");
	put(fresh, "partial");
	struct timespec ts[2] = {{1000, 0}, {1000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, tmp, ts, 0), 0);
	assert_int_equal(kg_cache_evict(c, UINT64_MAX, NULL, &e), 0);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(access(fresh, F_OK), 0);

	assert_int_equal(kg_cache_clear(c, &e), 4);
	assert_int_equal(kg_cache_stats(c, &st, &e), 0);
	assert_int_equal(st.entries, 0);
	kg_cache_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_kat),
		cmocka_unit_test(test_key_components),
		cmocka_unit_test(test_dir_checks),
		cmocka_unit_test(test_entry_integrity),
		cmocka_unit_test(test_eviction),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
