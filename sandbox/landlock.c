/* Landlock, best effort by ABI: inside the new root it is a second wall behind the mounts; where the
 * mount namespace is refused it is the only one (rules on the host paths, no private /tmp). The
 * constants are spelled out because distribution headers lag the kernel (Debian 12: ABI 2). The
 * seal (inside_seal.c) stacks one more domain that grants only what a sealed program may still open. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sb_int.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1u << 0)
#define LL_RULE_PATH_BENEATH 1

#define LL_FS_EXECUTE (1ull << 0)
#define LL_FS_WRITE_FILE (1ull << 1)
#define LL_FS_READ_FILE (1ull << 2)
#define LL_FS_READ_DIR (1ull << 3)
#define LL_FS_REMOVE_DIR (1ull << 4)
#define LL_FS_REMOVE_FILE (1ull << 5)
#define LL_FS_MAKE_CHAR (1ull << 6)
#define LL_FS_MAKE_DIR (1ull << 7)
#define LL_FS_MAKE_REG (1ull << 8)
#define LL_FS_MAKE_SOCK (1ull << 9)
#define LL_FS_MAKE_FIFO (1ull << 10)
#define LL_FS_MAKE_BLOCK (1ull << 11)
#define LL_FS_MAKE_SYM (1ull << 12)
#define LL_FS_REFER (1ull << 13) /* ABI 2 */
#define LL_FS_TRUNCATE (1ull << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ull << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ull << 0) /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ull << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ull << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ull << 1)
/* ABI 7 adds only audit-logging flags to landlock_restrict_self; the defaults (log denials of
 * this executable) suit us, so 7 handles like 6. */

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

static uint64_t fs_mask(int abi)
{
	uint64_t m = (LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: EXECUTE .. MAKE_SYM */
	if (abi >= 2)
		m |= LL_FS_REFER;
	if (abi >= 3)
		m |= LL_FS_TRUNCATE;
	if (abi >= 5)
		m |= LL_FS_IOCTL_DEV;
	return m;
}

static uint64_t rights_for(const struct sb_mnt *m)
{
	const uint64_t ro = LL_FS_READ_FILE | LL_FS_READ_DIR;
	const uint64_t exec = (m->flags & KG_SB_PATH_EXEC) ? LL_FS_EXECUTE : 0;
	switch (m->kind) {
	case SB_MNT_PROC: /* writable only when the spec asks (see mounts.c) */
		return ro | ((m->flags & KG_SB_PATH_RW) ? LL_FS_WRITE_FILE | LL_FS_TRUNCATE : 0);
	case SB_MNT_SYMLINK:
		return 0;
	case SB_MNT_TMPFS: /* /tmp is scratch; /dev only lists the nodes bound into it */
	case SB_MNT_BIND:
		break;
	}
	if (m->flags & KG_SB_PATH_DEV)
		return ro | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV;
	if (m->flags & KG_SB_PATH_RW)
		return ro | exec | LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR |
		       LL_FS_MAKE_REG | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO | LL_FS_MAKE_SYM | LL_FS_REFER |
		       LL_FS_TRUNCATE;
	return m->kind == SB_MNT_TMPFS ? LL_FS_READ_DIR : ro | exec;
}

static void notes_add(char *notes, size_t n, const char *s)
{
	size_t len = strlen(notes);
	if (len && len + 2 < n) {
		notes[len++] = ';';
		notes[len++] = ' ';
	}
	for (; *s && len + 1 < n; s++)
		notes[len++] = *s;
	notes[len] = '\0';
}

static int add_rule(int ruleset, const char *path, uint64_t rights, uint64_t mask)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	rights &= mask;
	if (!S_ISDIR(st.st_mode))
		rights &= LL_FILE_RIGHTS;
	if (!rights)
		goto out;
	struct ll_path_beneath pb = {.allowed_access = rights, .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0))
		rc = -errno;
out:
	close(fd);
	return rc;
}

int sb_landlock_apply(const struct sb_plan *p, int in_mountns, char *notes, size_t notes_sz)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 1)
		return -(errno ? errno : ENOSYS);
	if (abi > 7)
		abi = 7;
	struct ll_ruleset_attr attr = {.handled_access_fs = fs_mask((int)abi)};
	/* without a network namespace this is what keeps TCP shut; with one it costs nothing */
	if (abi >= 4)
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
	/* no signals to, and no abstract sockets of, processes outside the sandbox's domain */
	if (abi >= 6)
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
	size_t attr_sz = abi >= 6 ? sizeof(attr) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
	int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_sz, 0);
	if (ruleset < 0)
		return -errno;
	int rc = 0;
	for (int i = 0; i < p->n_mnts && !rc; i++) {
		const struct sb_mnt *m = &p->mnts[i];
		if (m->kind == SB_MNT_SYMLINK || m->skipped)
			continue;
		/* Without the mount namespace the tmpfs entries do not exist: the host's /tmp and /proc
		 * stay out of reach, and the caller points TMPDIR at a RW path. */
		if (!in_mountns && m->kind != SB_MNT_BIND)
			continue;
		rc = add_rule(ruleset, in_mountns ? m->dst : m->src, rights_for(m), attr.handled_access_fs);
	}
	/* sanitizer runtimes read /proc/self/maps at start (sanitizer builds only) */
	if (!rc && !in_mountns && p->sanitize)
		rc = add_rule(ruleset, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR, attr.handled_access_fs);
	if (!rc && syscall(SYS_landlock_restrict_self, ruleset, 0))
		rc = -errno;
	close(ruleset);
	if (rc)
		return rc;
	if (abi < 6)
		notes_add(notes, notes_sz,
			  abi < 4 ? "landlock: ABI < 4, no TCP or signal scoping"
				  : "landlock: ABI < 6, no signal scoping");
	return (int)abi;
}

int sb_landlock_restrict_paths(const struct sb_seal_path *paths, int n)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 1)
		return -ENOSYS;
	if (abi > 7)
		abi = 7;
	struct ll_ruleset_attr attr = {.handled_access_fs = fs_mask((int)abi)};
	int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(uint64_t), 0);
	if (ruleset < 0)
		return -errno;
	const uint64_t ro = LL_FS_READ_FILE | LL_FS_READ_DIR;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++)
		rc = add_rule(ruleset, paths[i].path,
			      paths[i].rw ? ro | LL_FS_WRITE_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV : ro,
			      attr.handled_access_fs);
	if (!rc && syscall(SYS_landlock_restrict_self, ruleset, 0))
		rc = -errno;
	close(ruleset);
	return rc;
}
