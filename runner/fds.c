/* The runner's own open descriptors, by what they point at: the filter it applies names the
 * driver's device files (ioctl) and a tool's sockets (sendmsg) by number. */
#include "runner/backend.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kg_runner_fds_to(const char *prefix, int *fds, int max)
{
	int n = 0;
	size_t plen = strlen(prefix);
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < max) {
		char link[64], target[PATH_MAX];
		int fd = atoi(de->d_name);
		if (de->d_name[0] == '.' || fd == dirfd(d))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		if (!strncmp(target, prefix, plen))
			fds[n++] = fd;
	}
	closedir(d);
	return n;
}
