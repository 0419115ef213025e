/* kg_ufile: opening the files a user names without following links and without blocking
 * (kg_ufile.h). openat2(RESOLVE_NO_SYMLINKS) does it in one call where the kernel has it; else a
 * walk opens one component at a time with O_NOFOLLOW. The type is checked on an O_PATH fd, so a
 * device or FIFO is never opened for reading at all. */
#include "kg_ufile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

static int refuse_link(const char *path, const char *what, kg_error *e)
{
	return kg_err(e, -ELOOP,
		      "%s %s: a symbolic link (the file or a directory on its path); kgate does not follow links in "
		      "the files it reads for you: name the file itself",
		      what, path);
}

/* One component at a time from the start (or /), each opened O_PATH|O_NOFOLLOW: a link anywhere
 * is refused, and a link swapped in after a check is never followed either. */
static int walk_open(const char *path, const char *what, int flags, kg_error *e)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return kg_err(e, -ENAMETOOLONG, "%s %s: path too long", what, path);
	int dir = path[0] == '/' ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC) : AT_FDCWD;
	if (dir == -1)
		return kg_err(e, -errno, "%s %s: %s", what, path, strerror(errno));
	char *save = NULL, *comp = strtok_r(buf, "/", &save);
	int fd = -1, rc = 0;
	if (!comp) { /* "/" itself */
		fd = dir;
		dir = -1;
		goto out;
	}
	while (comp) {
		char *next = strtok_r(NULL, "/", &save);
		struct stat st;
		if (!fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode)) {
			rc = refuse_link(path, what, e);
			goto out;
		}
		fd = openat(dir, comp, O_NOFOLLOW | O_CLOEXEC | (next ? O_PATH | O_DIRECTORY : flags));
		if (fd < 0) {
			rc = errno == ELOOP || (next && errno == ENOTDIR && !fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) &&
						S_ISLNK(st.st_mode))
				     ? refuse_link(path, what, e)
				     : kg_err(e, -errno, "%s %s: %s", what, path, strerror(errno));
			goto out;
		}
		if (dir >= 0)
			close(dir);
		dir = next ? fd : -1;
		if (next)
			fd = -1;
		comp = next;
	}
out:
	if (dir >= 0)
		close(dir);
	if (rc && fd >= 0)
		close(fd);
	return rc ? rc : fd;
}

static int force_walk;

void kg_ufile_force_walk(int on)
{
	force_walk = on;
}

/* An fd of path opened with flags (O_PATH, or O_RDONLY|O_NONBLOCK), no link followed anywhere. */
static int path_open(const char *path, const char *what, int flags, kg_error *e)
{
#ifdef SYS_openat2
	if (force_walk)
		return walk_open(path, what, flags, e);
	struct open_how how = {
		.flags = (unsigned)flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno == ELOOP)
		return refuse_link(path, what, e);
	/* ENOSYS: an older kernel; EPERM: a seccomp filter (containers) that does not know it */
	if (errno != ENOSYS && errno != EPERM && errno != E2BIG && errno != EINVAL)
		return kg_err(e, -errno, "%s %s: %s", what, path, strerror(errno));
#endif
	return walk_open(path, what, flags, e);
}

static int check_type(const struct stat *st, const char *path, const char *what, size_t max, kg_error *e)
{
	if (S_ISLNK(st->st_mode))
		return refuse_link(path, what, e);
	if (S_ISDIR(st->st_mode))
		return kg_err(e, -EISDIR, "%s %s: a directory, not a file", what, path);
	if (S_ISFIFO(st->st_mode))
		return kg_err(e, -ENXIO, "%s %s: a FIFO (named pipe), not a regular file", what, path);
	if (S_ISSOCK(st->st_mode))
		return kg_err(e, -ENXIO, "%s %s: a socket, not a regular file", what, path);
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		return kg_err(e, -ENXIO, "%s %s: a device, not a regular file", what, path);
	if (!S_ISREG(st->st_mode))
		return kg_err(e, -ENXIO, "%s %s: not a regular file", what, path);
	if (st->st_size == 0)
		return kg_err(e, -ENODATA, "%s %s: empty file", what, path);
	if ((unsigned long long)st->st_size > max)
		return kg_err(e, -EFBIG, "%s %s: %lld bytes, larger than the limit of %zu", what, path,
			      (long long)st->st_size, max);
	return 0;
}

int kg_ufile_open(const char *path, const char *what, size_t max, struct stat *st, kg_error *e)
{
	if (!path || !*path)
		return kg_err(e, -ENOENT, "%s: empty path", what);
	int pfd = path_open(path, what, O_PATH, e), fd = -1, rc = 0;
	if (pfd < 0)
		return pfd;
	struct stat ps;
	if (fstat(pfd, &ps)) {
		rc = kg_err(e, -errno, "%s %s: %s", what, path, strerror(errno));
		goto out;
	}
	if ((rc = check_type(&ps, path, what, max, e)))
		goto out;
	/* Reopen the very inode the O_PATH fd names, for reading; O_NONBLOCK so that nothing can
	 * block even if it changed kind, which the second fstat would then catch. */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) { /* no /proc: the path again, the inode compared below */
		fd = path_open(path, what, O_RDONLY | O_NONBLOCK | O_NOCTTY, e);
		if (fd < 0) {
			rc = fd;
			goto out;
		}
	}
	if (fd < 0) {
		rc = kg_err(e, -errno, "%s %s: %s", what, path, strerror(errno));
		goto out;
	}
	if (fstat(fd, st)) {
		rc = kg_err(e, -errno, "%s %s: %s", what, path, strerror(errno));
		goto out;
	}
	if (st->st_dev != ps.st_dev || st->st_ino != ps.st_ino) {
		rc = kg_err(e, -ESTALE, "%s %s: replaced while being opened", what, path);
		goto out;
	}
	if ((rc = check_type(st, path, what, max, e)))
		goto out;
	int fl = fcntl(fd, F_GETFL);
	if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
		rc = kg_err(e, -errno, "%s %s: fcntl: %s", what, path, strerror(errno));
out:
	close(pfd);
	if (rc && fd >= 0)
		close(fd);
	return rc ? rc : fd;
}

int kg_ufile_read(const char *path, const char *what, size_t max, struct kg_ufile *f, kg_error *e)
{
	memset(f, 0, sizeof(*f));
	int fd = kg_ufile_open(path, what, max, &f->st, e), rc = 0;
	if (fd < 0)
		return fd;
	kg_buf b = {0};
	for (;;) {
		char chunk[65536];
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = kg_err(e, -errno, "%s %s: read: %s", what, path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		/* the size was checked on open; a file that grows since is cut off here */
		if (b.len + (size_t)n > max) {
			rc = kg_err(e, -EFBIG, "%s %s: larger than the limit of %zu bytes", what, path, max);
			goto out;
		}
		if ((rc = kg_buf_append(&b, chunk, (size_t)n))) {
			kg_err(e, rc, "%s %s: out of memory", what, path);
			goto out;
		}
	}
	if (!b.len) {
		rc = kg_err(e, -ENODATA, "%s %s: empty file", what, path);
		goto out;
	}
	f->data = b.data;
	f->len = b.len;
	f->owned = f->st.st_uid == geteuid();
	b.data = NULL;
out:
	kg_buf_free(&b);
	close(fd);
	return rc;
}

void kg_ufile_free(struct kg_ufile *f)
{
	free(f->data);
	f->data = NULL;
	f->len = 0;
}

void kg_ufile_redact(int owned, const char *path, kg_error *e)
{
	if (owned || !e)
		return;
	size_t pl = strlen(path);
	long line = 0;
	if (!strncmp(e->msg, path, pl) && e->msg[pl] == ':')
		line = strtol(e->msg + pl + 1, NULL, 10);
	if (line > 0)
		snprintf(e->msg, sizeof(e->msg), "%s:%ld: invalid (the details are not shown: the file is not yours)",
			 path, line);
	else
		snprintf(e->msg, sizeof(e->msg), "%s: invalid (the details are not shown: the file is not yours)",
			 path);
}
