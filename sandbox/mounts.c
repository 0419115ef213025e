/* The sandbox's file system: a fresh root on a tmpfs holding only what the profile and the spec ask
 * for, bound read-only from the host unless said otherwise, then pivot_root into it (bubblewrap's
 * approach). The parent plans every entry; the child, which may not allocate, builds the tree. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sb_int.h"

/* System paths every profile sees read-only and executable. On merged-/usr hosts most of these
 * are symlinks into /usr; they are recreated as symlinks so that the tree looks like the host. */
static const char *const sys_dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"};
/* Only what the dynamic loader and `cc` (an alternatives symlink) read; never all of /etc, which
 * holds credentials, host names and site configuration. */
static const char *const etc_entries[] = {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/alternatives"};
static const char *const dev_nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
	"/dev/urandom"};
static const char *const dev_links[][2] = {{"/dev/fd", "/proc/self/fd"}, {"/dev/stdin", "/proc/self/fd/0"},
	{"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"}};

static int plan_add(struct sb_plan *p, enum sb_mnt_kind kind, const char *src, const char *dst,
		    unsigned flags, int system, kg_error *e)
{
	if (p->n_mnts == p->cap_mnts) {
		int cap = p->cap_mnts ? p->cap_mnts * 2 : 32;
		struct sb_mnt *m = realloc(p->mnts, (size_t)cap * sizeof(*m));
		if (!m)
			return kg_err(e, -ENOMEM, "sandbox: out of memory planning mounts");
		p->mnts = m;
		p->cap_mnts = cap;
	}
	struct sb_mnt *m = &p->mnts[p->n_mnts];
	memset(m, 0, sizeof(*m));
	m->kind = kind;
	m->flags = flags;
	m->system = system;
	m->srcfd = -1;
	m->src = src ? strdup(src) : NULL;
	m->dst = strdup(dst);
	if ((src && !m->src) || !m->dst) {
		free(m->src);
		free(m->dst);
		return kg_err(e, -ENOMEM, "sandbox: out of memory planning mounts");
	}
	p->n_mnts++;
	return 0;
}

static int plan_tmpfs(struct sb_plan *p, const char *dst, uint64_t size, unsigned mode, unsigned flags,
		      kg_error *e)
{
	char opts[96];
	snprintf(opts, sizeof(opts), "mode=%04o,size=%" PRIu64, mode, size);
	/* src carries the mount options of a tmpfs: the child cannot format them itself */
	int rc = plan_add(p, SB_MNT_TMPFS, opts, dst, flags, 1, e);
	if (!rc) {
		p->mnts[p->n_mnts - 1].size = size;
		p->mnts[p->n_mnts - 1].mode = mode;
	}
	return rc;
}

/* A host system path: absent is fine, a symlink is replicated, anything else is bound. */
static int plan_system(struct sb_plan *p, const char *path, unsigned flags, kg_error *e)
{
	struct stat st;
	if (lstat(path, &st))
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			return 0;
		target[n] = '\0';
		return plan_add(p, SB_MNT_SYMLINK, target, path, 0, 1, e);
	}
	return plan_add(p, SB_MNT_BIND, path, path, flags | KG_SB_PATH_OPTIONAL, 1, e);
}

static int inside_ok(const char *path)
{
	if (!path || path[0] != '/' || strlen(path) >= PATH_MAX / 2)
		return 0;
	for (const char *s = path; (s = strstr(s, "..")); s += 2) {
		int starts = s == path || s[-1] == '/';
		int ends = s[2] == '\0' || s[2] == '/';
		if (starts && ends)
			return 0;
	}
	return 1;
}

static int planned(const struct sb_plan *p, const char *dst)
{
	for (int i = 0; i < p->n_mnts; i++)
		if (!strcmp(p->mnts[i].dst, dst))
			return 1;
	return 0;
}

/* A directory holding character devices and nothing else (nvidia-caps, for MIG): a pattern that
 * happens to match /dev/shm or /dev/pts must not bind the host's shared memory or terminals. */
static int dir_of_devices(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int ok = 1;
	struct dirent *de;
	while (ok && (de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ok = !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISCHR(st.st_mode);
	}
	closedir(d);
	return ok;
}

/* The spec's device patterns ("/dev/nvidia*"): every match that is a character device or a
 * directory of them is bound read-write; symlinks and anything else are left out, and a pattern
 * matching nothing is fine (no such device on this host). */
static int plan_devices(struct sb_plan *p, const char *const *pats, kg_error *e)
{
	int rc = 0;
	for (size_t i = 0; pats && pats[i] && !rc; i++) {
		if (pats[i][0] != '/')
			return kg_err(e, -EINVAL, "sandbox: device pattern %s: not absolute", pats[i]);
		glob_t g;
		int gr = glob(pats[i], 0, NULL, &g);
		if (gr == GLOB_NOSPACE) {
			globfree(&g);
			return kg_err(e, -ENOMEM, "sandbox: out of memory expanding %s", pats[i]);
		}
		for (size_t k = 0; gr == 0 && k < g.gl_pathc && !rc; k++) {
			const char *path = g.gl_pathv[k];
			struct stat st;
			if (lstat(path, &st) || !(S_ISCHR(st.st_mode) || (S_ISDIR(st.st_mode) && dir_of_devices(path))) ||
			    planned(p, path))
				continue;
			if (!inside_ok(path)) {
				rc = kg_err(e, -EINVAL, "sandbox: device %s: not a plain absolute path", path);
				break;
			}
			rc = plan_add(p, SB_MNT_BIND, path, path, KG_SB_PATH_DEV | KG_SB_PATH_OPTIONAL, 1, e);
		}
		globfree(&g);
	}
	return rc;
}

int sb_mounts_plan(struct sb_plan *p, const struct kg_sb_spec *s, kg_error *e)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < KG_ARRAY_LEN(sys_dirs); i++)
		rc = plan_system(p, sys_dirs[i], KG_SB_PATH_EXEC, e);
	for (size_t i = 0; !rc && i < KG_ARRAY_LEN(etc_entries); i++)
		rc = plan_system(p, etc_entries[i], 0, e);
	if (!rc)
		rc = plan_tmpfs(p, "/dev", 65536, 0755, 0, e);
	for (size_t i = 0; !rc && i < KG_ARRAY_LEN(dev_nodes); i++)
		rc = plan_add(p, SB_MNT_BIND, dev_nodes[i], dev_nodes[i], KG_SB_PATH_DEV | KG_SB_PATH_OPTIONAL,
			      1, e);
	for (size_t i = 0; !rc && i < KG_ARRAY_LEN(dev_links); i++)
		rc = plan_add(p, SB_MNT_SYMLINK, dev_links[i][1], dev_links[i][0], 0, 1, e);
	if (!rc)
		rc = plan_devices(p, s->devices, e);
	/* /proc: the toolchain reads /proc/self/exe, a GPU driver its /proc/driver entries. A run
	 * gets none by default: the candidate shares its process with the runner, and /proc/self/mem
	 * or /proc/self/maps are the classic ways to patch a harness past mprotect; a math kernel needs
	 * nothing from it. Sanitizer runtimes cannot start without /proc/self/maps, so there it is at
	 * least read-only. It is a fresh procfs of the child's own pid namespace, read-only (a write
	 * open of /proc/self/mem fails with EROFS even without Landlock) unless the spec asks for RW
	 * (a driver names its threads through /proc/self/task/TID/comm), which it pairs with
	 * readonly_opens. */
	enum kg_sb_proc proc = s->proc;
	if (proc == KG_SB_PROC_DEFAULT)
		proc = s->profile == KG_SB_PROFILE_COMPILE ? KG_SB_PROC_RO : KG_SB_PROC_NONE;
	if (proc == KG_SB_PROC_NONE && p->sanitize)
		proc = KG_SB_PROC_RO;
	if (!rc && proc != KG_SB_PROC_NONE)
		rc = plan_add(p, SB_MNT_PROC, NULL, "/proc", proc == KG_SB_PROC_RW ? KG_SB_PATH_RW : 0, 1, e);
	if (!rc && s->sys_ro)
		rc = plan_add(p, SB_MNT_BIND, "/sys", "/sys", KG_SB_PATH_OPTIONAL, 1, e);
	if (!rc)
		rc = plan_tmpfs(p, "/tmp", p->lim.tmpfs_bytes, 01777, KG_SB_PATH_RW, e);
	for (int i = 0; !rc && i < s->n_paths; i++) {
		const struct kg_sb_path *sp = &s->paths[i];
		if (!sp->host || sp->host[0] != '/')
			return kg_err(e, -EINVAL, "sandbox: path %s: not absolute", sp->host ? sp->host : "(null)");
		const char *inside = sp->inside ? sp->inside : sp->host;
		if (!inside_ok(inside))
			return kg_err(e, -EINVAL, "sandbox: inside path %s: not absolute or has '..'", inside);
		char real[PATH_MAX];
		if (!realpath(sp->host, real)) {
			if (sp->flags & KG_SB_PATH_OPTIONAL)
				continue;
			return kg_err(e, -errno, "sandbox: path %s: %s", sp->host, strerror(errno));
		}
		rc = plan_add(p, SB_MNT_BIND, real, inside, sp->flags, 0, e);
		/* without a mount namespace only an unmoved path can be honoured */
		if (!rc && strcmp(inside, sp->host) && strcmp(inside, real))
			p->mnts[p->n_mnts - 1].remapped = 1;
	}
	return rc;
}

void sb_mounts_free(struct sb_plan *p)
{
	for (int i = 0; i < p->n_mnts; i++) {
		free(p->mnts[i].src);
		free(p->mnts[i].dst);
	}
	free(p->mnts);
	p->mnts = NULL;
	p->n_mnts = p->cap_mnts = 0;
}

/* ---- child side: no allocation below this line ---- */

int sb_mounts_open_sources(struct sb_plan *p, const char **what)
{
	for (int i = 0; i < p->n_mnts; i++) {
		struct sb_mnt *m = &p->mnts[i];
		if (m->kind != SB_MNT_BIND)
			continue;
		m->srcfd = open(m->src, O_PATH | O_CLOEXEC);
		if (m->srcfd < 0) {
			if (m->flags & KG_SB_PATH_OPTIONAL) {
				m->skipped = 1;
				continue;
			}
			*what = m->src;
			return -errno;
		}
		struct stat st;
		if (fstat(m->srcfd, &st)) {
			*what = m->src;
			return -errno;
		}
		m->is_dir = S_ISDIR(st.st_mode);
	}
	return 0;
}

static void notes_add(char *notes, size_t n, const char *a, const char *b)
{
	size_t len = strlen(notes);
	const char *parts[] = {len ? "; " : "", a, b};
	for (size_t i = 0; i < KG_ARRAY_LEN(parts); i++)
		for (const char *s = parts[i]; *s && len + 1 < n; s++)
			notes[len++] = *s;
	notes[len] = '\0';
}

/* mkdir -p of the parents of rel (relative to the staging root) */
static int mkdir_parents(const char *rel)
{
	char buf[PATH_MAX];
	size_t n = strlen(rel);
	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, rel, n + 1);
	for (char *s = buf; *s; s++) {
		if (*s != '/' || s == buf)
			continue;
		*s = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

/* Restricts a mount tree (read-only, nosuid, nodev, noexec as asked). mount_setattr does the
 * whole tree at once; the remount fallback only the top mount and must restate the flags the
 * kernel locked when the mount came from a more privileged namespace. */
static int restrict_mount(const char *path, unsigned flags, int recursive)
{
	uint64_t set = MOUNT_ATTR_NOSUID;
	unsigned long ms = MS_NOSUID;
	if (!(flags & KG_SB_PATH_DEV)) {
		set |= MOUNT_ATTR_NODEV;
		ms |= MS_NODEV;
	}
	if (!(flags & KG_SB_PATH_RW) && !(flags & KG_SB_PATH_DEV)) {
		set |= MOUNT_ATTR_RDONLY;
		ms |= MS_RDONLY;
	}
	if (!(flags & KG_SB_PATH_EXEC)) {
		set |= MOUNT_ATTR_NOEXEC;
		ms |= MS_NOEXEC;
	}
	struct mount_attr attr = {.attr_set = set};
	if (!mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr, sizeof(attr)))
		return 0;
	if (errno != ENOSYS)
		return -errno;
	struct statvfs sv;
	if (statvfs(path, &sv))
		return -errno;
	static const unsigned long keep[][2] = {{ST_NOEXEC, MS_NOEXEC}, {ST_NOATIME, MS_NOATIME},
		{ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}, {ST_RDONLY, MS_RDONLY}};
	for (size_t i = 0; i < KG_ARRAY_LEN(keep); i++)
		if (sv.f_flag & keep[i][0])
			ms |= keep[i][1];
	return mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | ms, NULL) ? -errno : 0;
}

static void fd_path(int fd, char *buf)
{
	static const char pre[] = "/proc/self/fd/";
	char digits[16];
	int n = 0;
	do {
		digits[n++] = (char)('0' + fd % 10);
		fd /= 10;
	} while (fd && n < (int)sizeof(digits));
	memcpy(buf, pre, sizeof(pre) - 1);
	for (int i = 0; i < n; i++)
		buf[sizeof(pre) - 1 + (size_t)i] = digits[n - 1 - i];
	buf[sizeof(pre) - 1 + (size_t)n] = '\0';
}

/* Clones the tree at srcfd (opened before the identity switch) onto rel. */
static int bind_fd(int srcfd, const char *rel)
{
	int t = open_tree(srcfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (t >= 0) {
		int rc = move_mount(t, "", AT_FDCWD, rel, MOVE_MOUNT_F_EMPTY_PATH) ? -errno : 0;
		close(t);
		return rc;
	}
	if (errno != ENOSYS)
		return -errno;
	char path[40];
	fd_path(srcfd, path);
	return mount(path, rel, NULL, MS_BIND | MS_REC, NULL) ? -errno : 0;
}

static int mount_one(struct sb_mnt *m, const char *rel, char *notes, size_t notes_sz)
{
	int rc;
	switch (m->kind) {
	case SB_MNT_SYMLINK:
		return symlink(m->src, rel) && errno != EEXIST ? -errno : 0;
	case SB_MNT_TMPFS:
		if (mkdir(rel, 0755) && errno != EEXIST)
			return -errno;
		return mount("tmpfs", rel, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, m->src) ? -errno : 0;
	case SB_MNT_PROC:
		if (mkdir(rel, 0555) && errno != EEXIST)
			return -errno;
		/* mounting procfs in a user namespace fails where the host's /proc is partly masked
		 * (containers); the programs then run without it rather than with the host's */
		if (mount("proc", rel, "proc",
			  MS_NOSUID | MS_NODEV | MS_NOEXEC | ((m->flags & KG_SB_PATH_RW) ? 0 : MS_RDONLY), NULL)) {
			const char *name = strerrorname_np(errno);
			notes_add(notes, notes_sz, "mountns: no /proc: ", name ? name : "error");
		}
		return 0;
	case SB_MNT_BIND:
		if (m->is_dir) {
			if (mkdir(rel, 0755) && errno != EEXIST)
				return -errno;
		} else {
			int fd = open(rel, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
			if (fd < 0)
				return -errno;
			close(fd);
		}
		if ((rc = bind_fd(m->srcfd, rel)))
			return rc;
		close(m->srcfd);
		m->srcfd = -1;
		return restrict_mount(rel, m->flags, 1);
	}
	return -EINVAL;
}

int sb_mounts_build(struct sb_plan *p, const char **what, char *notes, size_t notes_sz)
{
	/* Staging point for the new root: it only has to exist; nothing of the host shows through,
	 * and the sources were opened before, so host paths under it stay reachable. */
	static const char *const stages[] = {"/tmp", "/mnt", "/var/tmp", "/run"};
	const char *stage = NULL;
	int rc;
	*what = "/";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -errno;
	for (size_t i = 0; i < KG_ARRAY_LEN(stages) && !stage; i++) {
		struct stat st;
		if (!lstat(stages[i], &st) && S_ISDIR(st.st_mode))
			stage = stages[i];
	}
	*what = stage ? stage : "(no staging directory)";
	if (!stage)
		return -ENOENT;
	if (mount("kgate-root", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1048576"))
		return -errno;
	if (chdir(stage))
		return -errno;
	for (int i = 0; i < p->n_mnts; i++) {
		struct sb_mnt *m = &p->mnts[i];
		if (m->skipped)
			continue;
		const char *rel = m->dst;
		while (*rel == '/')
			rel++;
		*what = m->dst;
		if (!*rel)
			return -EINVAL;
		if ((rc = mkdir_parents(rel)) || (rc = mount_one(m, rel, notes, notes_sz)))
			return rc;
	}
	/* pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves the
	 * tmpfs as / with no path back to the host (the trick from pivot_root(2)). */
	*what = "pivot_root";
	if (syscall(SYS_pivot_root, ".", "."))
		return -errno;
	if (umount2(".", MNT_DETACH))
		return -errno;
	if (chdir("/"))
		return -errno;
	*what = "read-only /";
	return restrict_mount("/", 0, 0);
}
