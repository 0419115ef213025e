/* The compile cache's key (cache.h): a SHA-256 over everything that decides what a compile
 * produces: the source, the command, the compiler's and the linked tools' identities (their
 * content, memoised by inode and mtime), kgate's own headers, kgate's version and the machine. */
#include "verifier/compile/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "kg_sha256.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

/* One field: tag, length, bytes. Lengths make the stream unambiguous ("ab"+"c" != "a"+"bc"). */
static void field(kg_sha256_ctx *h, const char *tag, const void *p, size_t n)
{
	uint8_t len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)((uint64_t)n >> (8 * i));
	kg_sha256_update(h, tag, strlen(tag) + 1);
	kg_sha256_update(h, len, sizeof(len));
	kg_sha256_update(h, p, n);
}

static void field_str(kg_sha256_ctx *h, const char *tag, const char *s)
{
	field(h, tag, s ? s : "", s ? strlen(s) : 0);
}

/* Hashes a whole file through fd into out; its size in *len. */
static int hash_fd(int fd, uint8_t out[32], uint64_t *len)
{
	kg_sha256_ctx h;
	kg_sha256_init(&h);
	*len = 0;
	enum { CHUNK = 1 << 16 };
	uint8_t *chunk = malloc(CHUNK);
	if (!chunk)
		return -ENOMEM;
	int rc = 0;
	for (;;) {
		ssize_t n = read(fd, chunk, CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -errno;
		if (n <= 0)
			break;
		kg_sha256_update(&h, chunk, (size_t)n);
		*len += (uint64_t)n;
	}
	free(chunk);
	kg_sha256_final(&h, out);
	return rc;
}

/* A compiler hashed once per process: nvcc is tens of MB, and a search verifies many candidates.
 * The memo holds only while the file's stat is the same. */
struct tool_memo {
	char path[4096];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	uint8_t id[32];
};
static struct tool_memo memo[4];
static int n_memo;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static int same_stat(const struct tool_memo *m, const struct stat *st)
{
	return m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
	       m->mtime.tv_sec == st->st_mtim.tv_sec && m->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       m->ctime.tv_sec == st->st_ctim.tv_sec && m->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

int kg_cache_tool_id(const char *path, uint8_t id[32], kg_error *e)
{
	char *real = realpath(path, NULL);
	if (!real)
		return kg_err(e, -errno, "compiler %s: %s", path, strerror(errno));
	int fd = open(real, O_RDONLY | O_CLOEXEC), rc = 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		rc = kg_err(e, -errno, "compiler %s: %s", real, strerror(errno));
		goto out;
	}
	pthread_mutex_lock(&memo_lock);
	for (int i = 0; i < n_memo; i++)
		if (!strcmp(memo[i].path, real) && same_stat(&memo[i], &st)) {
			memcpy(id, memo[i].id, 32);
			pthread_mutex_unlock(&memo_lock);
			goto out;
		}
	pthread_mutex_unlock(&memo_lock);
	uint8_t content[32];
	uint64_t len;
	if ((rc = hash_fd(fd, content, &len))) {
		kg_err(e, rc, "compiler %s: read: %s", real, strerror(-rc));
		goto out;
	}
	kg_sha256_ctx h;
	kg_sha256_init(&h);
	field_str(&h, "path", real);
	field(&h, "size", &len, sizeof(len));
	field(&h, "sha256", content, 32);
	kg_sha256_final(&h, id);
	pthread_mutex_lock(&memo_lock);
	struct tool_memo *m = &memo[n_memo < (int)KG_ARRAY_LEN(memo) ? n_memo++ : 0];
	snprintf(m->path, sizeof(m->path), "%s", real);
	m->dev = st.st_dev, m->ino = st.st_ino, m->size = st.st_size;
	m->mtime = st.st_mtim, m->ctime = st.st_ctim;
	memcpy(m->id, id, 32);
	pthread_mutex_unlock(&memo_lock);
out:
	if (fd >= 0)
		close(fd);
	free(real);
	return rc;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of include_dir/kgate, by name in a fixed order, names and contents: what a
 * candidate can #include from kgate. */
static int hash_headers(kg_sha256_ctx *h, const char *include_dir, kg_error *e)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/kgate", include_dir);
	DIR *d = opendir(dir);
	if (!d)
		return kg_err(e, -errno, "kgate headers %s: %s", dir, strerror(errno));
	char *names[256] = {0};
	int n = 0, rc = 0;
	struct dirent *de;
	while (!rc && (de = readdir(d)) && n < (int)KG_ARRAY_LEN(names)) {
		if (de->d_name[0] == '.')
			continue;
		if (!(names[n] = strdup(de->d_name)))
			rc = kg_err(e, -ENOMEM, "out of memory");
		else
			n++;
	}
	closedir(d);
	/* more files than any kgate ships: hashing only some would let the rest change unseen */
	if (!rc && n == (int)KG_ARRAY_LEN(names))
		rc = kg_err(e, -E2BIG, "kgate headers %s: more than %d files", dir, n);
	qsort(names, (size_t)n, sizeof(names[0]), name_cmp);
	for (int i = 0; i < n && !rc; i++) {
		char p[4500];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			if (fd >= 0)
				close(fd);
			continue; /* a subdirectory or something odd: not a header the compiler reads */
		}
		uint8_t dg[32];
		uint64_t len;
		if ((rc = hash_fd(fd, dg, &len)))
			kg_err(e, rc, "kgate header %s: %s", p, strerror(-rc));
		close(fd);
		field_str(h, "header", names[i]);
		field(h, "header-sha256", dg, 32);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	return rc ? rc : n ? 0 : kg_err(e, -ENOENT, "kgate headers %s: empty", dir);
}

int kg_cache_key(const struct kg_cache_key_in *in, uint8_t key[32], kg_error *e)
{
	if (!in->argv || !in->argv[0])
		return kg_err(e, -EINVAL, "cache key: no command");
	uint8_t tool[32];
	int rc = kg_cache_tool_id(in->argv[0], tool, e);
	if (rc)
		return rc;
	kg_sha256_ctx h;
	kg_sha256_init(&h);
	int fmt = KG_CACHE_FORMAT;
	field_str(&h, "kgate", KG_VERSION);
	field(&h, "format", &fmt, sizeof(fmt));
	field_str(&h, "backend", in->backend);
	field_str(&h, "arch", in->arch);
	struct utsname u;
	field_str(&h, "machine", uname(&u) ? "" : u.machine); /* a host compiler builds for the host */
	for (const char *const *a = in->argv; *a; a++)
		field_str(&h, "argv", *a);
	for (const char *const *a = in->envp; a && *a; a++)
		field_str(&h, "envp", *a);
	for (const char *const *a = in->mounts; a && *a; a++)
		field_str(&h, "mount", *a);
	field(&h, "compiler", tool, 32);
	if (in->script) {
		uint8_t script[32];
		if ((rc = kg_cache_tool_id(in->script, script, e)))
			return rc;
		field(&h, "script", script, 32);
	}
	field_str(&h, "tool_version", in->tool_version);
	if ((rc = hash_headers(&h, in->include_dir, e)))
		return rc;
	field(&h, "source", in->src, in->src_len);
	kg_sha256_final(&h, key);
	return 0;
}

/* ---- entries ---- */

