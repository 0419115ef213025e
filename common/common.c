/* Implementation of the shared helpers in kg_common.h: errors, buffers, files, clock, hashing.
 * Library code returns errors; nothing here exits. */
#include "kg_common.h"
#include "kg_cudrv.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int kg_err(kg_error *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return code;
}

int kg_err_wrap(kg_error *e, int code, const char *fmt, ...)
{
	if (e) {
		char prefix[512], old[sizeof(e->msg)];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(prefix, sizeof(prefix), fmt, ap);
		va_end(ap);
		memcpy(old, e->msg, sizeof(old));
		old[sizeof(old) - 1] = '\0';
		snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
		e->code = code;
	}
	return code;
}

static int buf_reserve(kg_buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int kg_buf_append(kg_buf *b, const void *p, size_t n)
{
	int rc = buf_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int kg_buf_vprintf(kg_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return -EINVAL;
	int rc = buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int kg_buf_printf(kg_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = kg_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

const char *kg_buf_str(kg_buf *b)
{
	if (!b->data && buf_reserve(b, 0))
		return "";
	return b->data;
}

void kg_buf_free(kg_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int kg_read_file(const char *path, size_t max, char **out, size_t *len, kg_error *e)
{
	int rc = 0;
	kg_buf b = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kg_err(e, -errno, "%s: %s", path, strerror(errno));
	for (;;) {
		char chunk[65536];
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = kg_err(e, -errno, "%s: read: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if (b.len + (size_t)n > max) {
			rc = kg_err(e, -EFBIG, "%s: larger than %zu bytes", path, max);
			goto out;
		}
		if ((rc = kg_buf_append(&b, chunk, (size_t)n))) {
			kg_err(e, rc, "%s: out of memory", path);
			goto out;
		}
	}
	if (!b.data && (rc = kg_buf_append(&b, "", 0)))
		goto out;
	*out = b.data;
	if (len)
		*len = b.len;
	b.data = NULL;
out:
	kg_buf_free(&b);
	close(fd);
	return rc;
}

int kg_write_file(const char *path, const void *data, size_t len, int mode, kg_error *e)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return kg_err(e, -errno, "%s: %s", path, strerror(errno));
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int rc = kg_err(e, -errno, "%s: write: %s", path, strerror(errno));
			close(fd);
			return rc;
		}
		p += n;
		len -= (size_t)n;
	}
	if (close(fd))
		return kg_err(e, -errno, "%s: close: %s", path, strerror(errno));
	return 0;
}

int kg_mkdirs(const char *path, int mode, kg_error *e)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return kg_err(e, -ENAMETOOLONG, "path too long: %s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, (mode_t)mode) && errno != EEXIST)
			return kg_err(e, -errno, "mkdir %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, (mode_t)mode) && errno != EEXIST)
		return kg_err(e, -errno, "mkdir %s: %s", tmp, strerror(errno));
	return 0;
}

static int rmtree_at(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return unlinkat(parent, name, 0) && errno != ENOENT ? -errno : 0;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rmtree_at(dirfd(d), de->d_name);
	}
	closedir(d);
	return unlinkat(parent, name, AT_REMOVEDIR) && errno != ENOENT ? -errno : 0;
}

int kg_mkdtemp(char *out, size_t outsz, const char *prefix, kg_error *e)
{
	const char *tmp = getenv("TMPDIR");
	if (snprintf(out, outsz, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix) >= (int)outsz) {
		out[0] = '\0';
		return kg_err(e, -ENAMETOOLONG, "temporary directory name too long under %s", tmp);
	}
	if (!mkdtemp(out)) {
		int rc = kg_err(e, -errno, "mkdtemp %s: %s", out, strerror(errno));
		out[0] = '\0';
		return rc;
	}
	return 0;
}

int kg_rmtree(const char *path)
{
	if (!path || !*path || !strcmp(path, "/"))
		return -EINVAL;
	return rmtree_at(AT_FDCWD, path);
}

void kg_dirname(const char *path, char *out, size_t outsz)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		snprintf(out, outsz, ".");
		return;
	}
	size_t n = (size_t)(slash - path);
	if (n == 0)
		n = 1;
	snprintf(out, outsz, "%.*s", (int)n, path);
}

int kg_path_join(char *out, size_t outsz, const char *a, const char *b)
{
	int n;
	if (b[0] == '/')
		n = snprintf(out, outsz, "%s", b);
	else
		n = snprintf(out, outsz, "%s/%s", a, b);
	return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

uint64_t kg_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t kg_hash64(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ull ^ seed;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

ssize_t kg_send_fd(int sock, const void *buf, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n;
}

ssize_t kg_recv_fd(int sock, void *buf, size_t len, int *fd)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	int got = -1;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); n > 0 && h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS && h->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&got, CMSG_DATA(h), sizeof(int));
	if (n > 0 && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (got >= 0)
			close(got);
		got = -1;
		n = -2; /* torn: the caller's malformed record */
	}
	if (fd)
		*fd = got;
	else if (got >= 0)
		close(got);
	return n;
}

const char *kg_cu_resolve(void *lib, const struct kg_cu_sym *syms, size_t n, size_t n_required, void *api)
{
	const char *missing = NULL;
	for (size_t i = 0; i < n; i++) {
		void *p = dlsym(lib, syms[i].name);
		if (!p && i < n_required && !missing)
			missing = syms[i].name;
		memcpy((char *)api + syms[i].off, &p, sizeof(p));
	}
	return missing;
}
