/* Scratch ownership: a root kgate's sandboxed programs run as the outer id 65534, so the tree
 * they must write to is handed to that id before they start. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "sb_int.h"

static int chown_tree(int at, const char *name, uid_t uid, gid_t gid)
{
	int rc = fchownat(at, name, uid, gid, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return rc;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rc ? rc : -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = chown_tree(dirfd(d), de->d_name, uid, gid);
		if (r && !rc)
			rc = r;
	}
	closedir(d);
	return rc;
}

int kg_sb_chown_scratch(const char *dir, kg_error *e)
{
	if (geteuid() != 0)
		return 0;
	int rc = chown_tree(AT_FDCWD, dir, SB_OUTER_ID, SB_OUTER_ID);
	if (rc)
		return kg_err(e, rc, "sandbox: chown %s: %s", dir, strerror(-rc));
	return 0;
}
