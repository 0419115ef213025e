/* The compile cache (cache.h; its key is cache_key.c). One file per entry, <key hex>.kgc under
 * <dir>/compile/: a header with the key, the lengths and a SHA-256 digest of the whole entry, then
 * the compiler's log and the .so. Every file is opened relative to the checked directory's fd, without following links;
 * an entry is believed only when its digest matches, and written only through rename. */
#include "verifier/compile/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "kg_sha256.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

#define STORE "compile"
#define SUFFIX ".kgc"
#define TMP_PREFIX ".tmp-"
#define HDR_LEN 96
static const char magic[8] = {'K', 'G', 'C', 'A', 'C', 'H', 'E', '\n'};

struct kg_cache {
	int dirfd; /* <dir>/compile, checked */
	char path[4096];
	uint64_t max_bytes;
};

/* ---- where, and whether to trust it ---- */

int kg_cache_dir(char *out, size_t outsz, kg_error *e)
{
	const char *d = getenv("KGATE_CACHE_DIR");
	if (d && *d) {
		if (d[0] != '/')
			return kg_err(e, -EINVAL, "KGATE_CACHE_DIR must be an absolute path, got '%s'", d);
		snprintf(out, outsz, "%s", d);
		return 0;
	}
	/* the XDG spec says to ignore a relative XDG_CACHE_HOME */
	const char *x = getenv("XDG_CACHE_HOME");
	if (x && x[0] == '/') {
		snprintf(out, outsz, "%s/kgate", x);
		return 0;
	}
	const char *home = getenv("HOME");
	if (!home || home[0] != '/') {
		struct passwd *pw = getpwuid(geteuid());
		home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
	}
	if (!home)
		return kg_err(e, -ENOENT, "no cache directory: set KGATE_CACHE_DIR (no HOME)");
	snprintf(out, outsz, "%s/.cache/kgate", home);
	return 0;
}

/* The directory behind fd may hold artifacts kgate will load: only if nobody but this user can
 * put them there. */
static int check_dir(int fd, const char *path, kg_error *e)
{
	struct stat st;
	if (fstat(fd, &st))
		return kg_err(e, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return kg_err(e, -ENOTDIR, "%s: not a directory", path);
	if (st.st_uid != geteuid())
		return kg_err(e, -EPERM, "%s is owned by uid %u, not by this user (uid %u)", path, (unsigned)st.st_uid,
			      (unsigned)geteuid());
	if (st.st_mode & 022)
		return kg_err(e, -EPERM, "%s is %s-writable (mode %04o); make it 0700", path,
			      st.st_mode & 002 ? "world" : "group", (unsigned)(st.st_mode & 07777));
	return 0;
}

/* openat of a directory, never through a link, then the checks above. */
static int open_dir_at(int at, const char *name, const char *path, kg_error *e)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR
			       ? kg_err(e, -ELOOP, "%s: a symbolic link or not a directory; kgate does not follow links "
						   "to its cache",
					path)
			       : kg_err(e, -errno, "%s: %s", path, strerror(errno));
	int rc = check_dir(fd, path, e);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

static int parse_max(uint64_t *out, kg_error *e)
{
	const char *s = getenv("KGATE_CACHE_MAX_MB");
	*out = (uint64_t)KG_CACHE_DEFAULT_MAX_MB << 20;
	if (!s || !*s)
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || s[0] < '0' || s[0] > '9' || v > (1ull << 30))
		return kg_err(e, -EINVAL, "KGATE_CACHE_MAX_MB: expected a number of MiB, got '%s'", s);
	if (!v)
		return kg_err(e, -ECANCELED, "the compile cache is off (KGATE_CACHE_MAX_MB=0)");
	*out = (uint64_t)v << 20;
	return 0;
}

int kg_cache_open(const char *dir, struct kg_cache **out, kg_error *e)
{
	char path[4096], store[4200];
	int rc;
	*out = NULL;
	uint64_t max;
	if ((rc = parse_max(&max, e)))
		return rc;
	if (!dir) {
		if ((rc = kg_cache_dir(path, sizeof(path), e)))
			return rc;
	} else if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
		return kg_err(e, -ENAMETOOLONG, "cache directory path too long");
	}
	/* 0700 for whatever is created (~/.cache too, as XDG asks); an existing one is checked below */
	if ((rc = kg_mkdirs(path, 0700, e)))
		return kg_err_wrap(e, rc, "compile cache");
	int root = open_dir_at(AT_FDCWD, path, path, e);
	if (root < 0)
		return root;
	snprintf(store, sizeof(store), "%s/" STORE, path);
	if (mkdirat(root, STORE, 0700) && errno != EEXIST) {
		rc = kg_err(e, -errno, "mkdir %s: %s", store, strerror(errno));
		close(root);
		return rc;
	}
	int fd = open_dir_at(root, STORE, store, e);
	close(root);
	if (fd < 0)
		return fd;
	struct kg_cache *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return kg_err(e, -ENOMEM, "out of memory");
	}
	c->dirfd = fd;
	c->max_bytes = max;
	snprintf(c->path, sizeof(c->path), "%s", path);
	*out = c;
	return 0;
}

void kg_cache_close(struct kg_cache *c)
{
	if (!c)
		return;
	close(c->dirfd);
	free(c);
}

const char *kg_cache_path(const struct kg_cache *c)
{
	return c->path;
}

void kg_cache_set_max(struct kg_cache *c, uint64_t max_bytes)
{
	c->max_bytes = max_bytes;
}

/* ---- the key ---- */

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The header (magic, format, key, lengths) and the digest over header-without-digest, log, so. */
static void entry_digest(const uint8_t *hdr, const void *log, size_t log_len, const void *so, size_t so_len,
			 uint8_t out[32])
{
	kg_sha256_ctx h;
	kg_sha256_init(&h);
	kg_sha256_update(&h, hdr, 64);
	kg_sha256_update(&h, log, log_len);
	kg_sha256_update(&h, so, so_len);
	kg_sha256_final(&h, out);
}

static void entry_name(const uint8_t key[32], char name[80])
{
	char hex[65];
	kg_sha256_tohex(key, hex);
	snprintf(name, 80, "%s" SUFFIX, hex);
}

/* Reads all of fd (at most max bytes, which the caller took from fstat) into a new buffer. */
static int read_all(int fd, size_t size, uint8_t **out)
{
	uint8_t *b = malloc(size ? size : 1);
	if (!b)
		return -ENOMEM;
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, b + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(b);
			return n < 0 ? -errno : -EIO; /* shrank under us */
		}
		got += (size_t)n;
	}
	*out = b;
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Validates an entry read whole; NULL when sound, else why not. */
static const char *entry_check(const uint8_t *b, size_t size, const uint8_t key[32])
{
	if (size < HDR_LEN || memcmp(b, magic, sizeof(magic)))
		return "not a kgate cache entry (truncated or overwritten)";
	if (get64(b + 8) != KG_CACHE_FORMAT)
		return "another entry format";
	if (memcmp(b + 16, key, 32))
		return "its key does not match its name";
	uint64_t log_len = get64(b + 48), so_len = get64(b + 56);
	if (log_len > size || so_len > size || HDR_LEN + log_len + so_len != size || !so_len)
		return "its lengths do not add up (truncated)";
	uint8_t dg[32];
	entry_digest(b, b + HDR_LEN, log_len, b + HDR_LEN + log_len, so_len, dg);
	if (memcmp(dg, b + 64, 32))
		return "its content hash does not match (modified or damaged)";
	return NULL;
}

int kg_cache_get(struct kg_cache *c, const uint8_t key[32], const char *so_path, char *log, size_t logsz,
		 char *note, size_t notesz, kg_error *e)
{
	char name[80];
	entry_name(key, name);
	if (note && notesz)
		note[0] = '\0';
	int fd = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	const char *bad = NULL;
	uint8_t *b = NULL;
	struct stat st;
	if (fd < 0)
		bad = errno == ELOOP ? "a symbolic link" : "cannot be opened";
	else if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		bad = "not a regular file";
	else if (st.st_uid != geteuid() || (st.st_mode & 022))
		bad = "not owned by this user, or writable by others";
	else if ((uint64_t)st.st_size > KG_CACHE_ENTRY_MAX + 65536ull)
		bad = "larger than any entry kgate writes";
	else if (read_all(fd, (size_t)st.st_size, &b))
		bad = "cannot be read";
	else
		bad = entry_check(b, (size_t)st.st_size, key);
	if (bad) {
		/* a miss, never an error: the entry goes and the compiler runs */
		if (note && notesz)
			snprintf(note, notesz, "cache entry %.16s... %s: removed", name, bad);
		unlinkat(c->dirfd, name, 0);
		if (fd >= 0)
			close(fd);
		free(b);
		return 0;
	}
	uint64_t log_len = get64(b + 48), so_len = get64(b + 56);
	int out = open(so_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755), rc = 0;
	if (out < 0) {
		rc = kg_err(e, -errno, "%s: %s", so_path, strerror(errno));
	} else {
		rc = write_all(out, b + HDR_LEN + log_len, (size_t)so_len);
		if (close(out) && !rc)
			rc = -errno;
		if (rc) {
			kg_err(e, rc, "%s: write: %s", so_path, strerror(-rc));
			unlink(so_path);
		}
	}
	if (!rc && log && logsz) {
		size_t n = log_len < logsz - 1 ? (size_t)log_len : logsz - 1;
		memcpy(log, b + HDR_LEN, n);
		log[n] = '\0';
	}
	if (!rc)
		futimens(fd, NULL); /* the LRU clock: atime is unreliable (noatime, relatime) */
	close(fd);
	free(b);
	return rc ? rc : 1;
}

int kg_cache_put(struct kg_cache *c, const uint8_t key[32], const char *so_path, const char *log, kg_error *e)
{
	/* the .so was written by the sandboxed compiler into kgate's scratch: read it without a link */
	int in = open(so_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), rc = 0, fd = -1;
	uint8_t *so = NULL, *hdr = NULL;
	char name[80], tmp[80];
	struct stat st;
	if (in < 0)
		return kg_err(e, -errno, "%s: %s", so_path, strerror(errno));
	if (fstat(in, &st) || !S_ISREG(st.st_mode) || !st.st_size) {
		rc = kg_err(e, -EINVAL, "%s: not a regular non-empty file", so_path);
		goto out;
	}
	if ((uint64_t)st.st_size > KG_CACHE_ENTRY_MAX || (uint64_t)st.st_size > c->max_bytes / 4) {
		rc = kg_err(e, -EFBIG, "%s: %lld bytes, too large to cache", so_path, (long long)st.st_size);
		goto out;
	}
	if ((rc = read_all(in, (size_t)st.st_size, &so))) {
		kg_err(e, rc, "%s: read: %s", so_path, strerror(-rc));
		goto out;
	}
	size_t log_len = log ? strlen(log) : 0;
	if (!(hdr = calloc(1, HDR_LEN))) {
		rc = kg_err(e, -ENOMEM, "out of memory");
		goto out;
	}
	memcpy(hdr, magic, sizeof(magic));
	put64(hdr + 8, KG_CACHE_FORMAT);
	memcpy(hdr + 16, key, 32);
	put64(hdr + 48, log_len);
	put64(hdr + 56, (uint64_t)st.st_size);
	entry_digest(hdr, log, log_len, so, (size_t)st.st_size, hdr + 64);

	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = kg_now_ns();
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%d-%016llx", (int)getpid(), (unsigned long long)rnd);
	fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = kg_err(e, -errno, "%s/%s/%s: %s", c->path, STORE, tmp, strerror(errno));
		goto out;
	}
	if ((rc = write_all(fd, hdr, HDR_LEN)) || (rc = write_all(fd, log, log_len)) ||
	    (rc = write_all(fd, so, (size_t)st.st_size)) || (close(fd) && (rc = -errno))) {
		fd = -1;
		kg_err(e, rc, "writing a cache entry: %s", strerror(-rc));
		unlinkat(c->dirfd, tmp, 0);
		goto out;
	}
	fd = -1;
	/* readers see the old entry or the whole new one, never a part (a crash leaves only a .tmp-
	 * file, which eviction collects) */
	entry_name(key, name);
	if (renameat(c->dirfd, tmp, c->dirfd, name)) {
		rc = kg_err(e, -errno, "rename into %s/%s: %s", c->path, STORE, strerror(errno));
		unlinkat(c->dirfd, tmp, 0);
		goto out;
	}
	rc = kg_cache_evict(c, c->max_bytes, NULL, e);
out:
	if (fd >= 0)
		close(fd);
	close(in);
	free(so);
	free(hdr);
	return rc;
}

/* ---- eviction, statistics ---- */

struct ent {
	char name[80];
	uint64_t size;
	struct timespec mtime;
};

static int ent_older(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int is_entry_name(const char *n)
{
	size_t l = strlen(n);
	return l == 64 + strlen(SUFFIX) && !strcmp(n + 64, SUFFIX) && strspn(n, "0123456789abcdef") == 64;
}

/* Lists the entries (and, with clear_tmp, removes temporaries older than an hour: a writer that
 * died; a live writer's is seconds old). */
static int scan(struct kg_cache *c, struct ent **out, int *n_out, int clear_tmp, kg_error *e)
{
	int fd = dup(c->dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return kg_err(e, -errno, "%s: %s", c->path, strerror(errno));
	}
	rewinddir(d);
	struct ent *v = NULL;
	int n = 0, cap = 0, rc = 0;
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
			if (clear_tmp && st.st_mtime < now - 3600)
				unlinkat(c->dirfd, de->d_name, 0);
			continue;
		}
		if (!is_entry_name(de->d_name))
			continue;
		if (n == cap) {
			struct ent *nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 64) * sizeof(*v));
			if (!nv) {
				rc = kg_err(e, -ENOMEM, "out of memory");
				break;
			}
			v = nv;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].size = (uint64_t)st.st_size;
		v[n].mtime = st.st_mtim;
		n++;
	}
	closedir(d);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n_out = n;
	return 0;
}

int kg_cache_evict(struct kg_cache *c, uint64_t max_bytes, struct kg_cache_stats *st, kg_error *e)
{
	struct ent *v = NULL;
	int n = 0, rc = scan(c, &v, &n, 1, e), evicted = 0;
	if (rc)
		return rc;
	uint64_t total = 0;
	for (int i = 0; i < n; i++)
		total += v[i].size;
	if (total > max_bytes) {
		qsort(v, (size_t)n, sizeof(*v), ent_older);
		for (int i = 0; i < n && total > max_bytes; i++)
			if (!unlinkat(c->dirfd, v[i].name, 0) || errno == ENOENT) {
				total -= v[i].size;
				evicted++;
			}
	}
	if (st) {
		st->entries = n - evicted;
		st->bytes = total;
		st->max_bytes = c->max_bytes;
		st->evicted = evicted;
	}
	free(v);
	return 0;
}

int kg_cache_stats(struct kg_cache *c, struct kg_cache_stats *st, kg_error *e)
{
	struct ent *v = NULL;
	int n = 0, rc = scan(c, &v, &n, 0, e);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->entries = n;
	st->max_bytes = c->max_bytes;
	for (int i = 0; i < n; i++)
		st->bytes += v[i].size;
	free(v);
	return 0;
}

int kg_cache_clear(struct kg_cache *c, kg_error *e)
{
	struct ent *v = NULL;
	int n = 0, rc = scan(c, &v, &n, 1, e), removed = 0;
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		removed += !unlinkat(c->dirfd, v[i].name, 0);
	free(v);
	return removed;
}
