/* cgroup v2 limits, where the host delegates a writable tree with the memory and pids controllers:
 * a child cgroup per spawn bounds memory (swap included) and tasks, reports OOM kills, and kills
 * every task at once (cgroup.kill). Everything here runs in the parent. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sb_int.h"

static int write_str(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, val, strlen(val));
	int rc = n < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static int read_small(const char *dir, const char *file, char *buf, size_t n)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t got = read(fd, buf, n - 1);
	int rc = got < 0 ? -errno : 0;
	buf[got > 0 ? got : 0] = '\0';
	close(fd);
	return rc;
}

static int has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *s = list; (s = strstr(s, word)); s += n)
		if ((s == list || s[-1] == ' ') && (s[n] == ' ' || s[n] == '\n' || s[n] == '\0'))
			return 1;
	return 0;
}

/* Our own cgroup v2 directory: the cgroup2 mount point plus the "0::" path. */
static int own_dir(char *out, size_t n)
{
	char mnt[PATH_MAX] = "", rel[PATH_MAX] = "";
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - cgroup2 ");
		if (!sep)
			continue;
		/* fields: id parent major:minor root mount-point ... */
		char *s = line;
		for (int i = 0; i < 4 && s; i++)
			s = strchr(s + 1, ' ');
		if (!s)
			continue;
		char *end = strchr(s + 1, ' ');
		if (!end || (size_t)(end - s - 1) >= sizeof(mnt))
			continue;
		memcpy(mnt, s + 1, (size_t)(end - s - 1));
		mnt[end - s - 1] = '\0';
		break;
	}
	fclose(f);
	if (!mnt[0])
		return -ENOENT;
	if (!(f = fopen("/proc/self/cgroup", "re")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(rel, sizeof(rel), "%s", line + 3);
	}
	fclose(f);
	if (!rel[0])
		return -ENOENT;
	if (snprintf(out, n, "%s%s", mnt, strcmp(rel, "/") ? rel : "") >= (int)n)
		return -ENAMETOOLONG;
	return 0;
}

int sb_cgroup_create(struct sb_cgroup *cg, uint64_t mem_bytes, uint32_t pids, char *why, size_t n)
{
	static unsigned seq;
	char base[PATH_MAX], buf[512];
	int rc;
	memset(cg, 0, sizeof(*cg));
	if ((rc = own_dir(base, sizeof(base)))) {
		snprintf(why, n, "cgroup: no cgroup2 hierarchy");
		return rc;
	}
	if ((rc = read_small(base, "cgroup.subtree_control", buf, sizeof(buf)))) {
		snprintf(why, n, "cgroup: %s: %s", base, strerror(-rc));
		return rc;
	}
	if (!has_word(buf, "memory") || !has_word(buf, "pids")) {
		char avail[512] = "";
		read_small(base, "cgroup.controllers", avail, sizeof(avail));
		if (!has_word(avail, "memory") || !has_word(avail, "pids")) {
			snprintf(why, n, "cgroup: %s lacks the memory and pids controllers (v1 host?)", base);
			return -EOPNOTSUPP;
		}
		/* fails with EBUSY where our cgroup holds processes (no internal processes rule) */
		if ((rc = write_str(base, "cgroup.subtree_control", "+memory +pids"))) {
			snprintf(why, n, "cgroup: cannot enable memory, pids under %s: %s", base, strerror(-rc));
			return rc;
		}
	}
	unsigned id = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	if (snprintf(cg->path, sizeof(cg->path), "%s/kgate-sb-%d-%u", base, (int)getpid(), id) >=
	    (int)sizeof(cg->path)) {
		snprintf(why, n, "cgroup: path too long");
		return -ENAMETOOLONG;
	}
	if (mkdir(cg->path, 0755)) {
		rc = -errno;
		snprintf(why, n, "cgroup: mkdir %s: %s", cg->path, strerror(errno));
		return rc;
	}
	cg->active = 1;
	if (mem_bytes)
		snprintf(buf, sizeof(buf), "%" PRIu64, mem_bytes);
	else
		snprintf(buf, sizeof(buf), "max");
	if ((rc = write_str(cg->path, "memory.max", buf)))
		goto fail;
	/* swap would let the child exceed memory.max quietly; absent without swap accounting */
	write_str(cg->path, "memory.swap.max", "0");
	snprintf(buf, sizeof(buf), "%" PRIu32, pids);
	if ((rc = write_str(cg->path, "pids.max", buf)))
		goto fail;
	return 0;
fail:
	snprintf(why, n, "cgroup: setting limits in %s: %s", cg->path, strerror(-rc));
	sb_cgroup_destroy(cg);
	return rc;
}

int sb_cgroup_attach(struct sb_cgroup *cg, pid_t pid)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%d", (int)pid);
	return write_str(cg->path, "cgroup.procs", buf);
}

long sb_cgroup_oom_kills(const struct sb_cgroup *cg)
{
	char buf[1024];
	if (!cg->active || read_small(cg->path, "memory.events", buf, sizeof(buf)))
		return 0;
	const char *s = strstr(buf, "oom_kill ");
	return s ? strtol(s + 9, NULL, 10) : 0;
}

void sb_cgroup_kill(const struct sb_cgroup *cg)
{
	if (!cg->active || !write_str(cg->path, "cgroup.kill", "1"))
		return;
	/* before 5.14: one by one (the pid namespace or process group catches what forks meanwhile) */
	char buf[4096];
	if (read_small(cg->path, "cgroup.procs", buf, sizeof(buf)))
		return;
	for (char *s = buf, *end; *s; s = end) {
		long pid = strtol(s, &end, 10);
		if (end == s)
			break;
		if (pid > 0)
			kill((pid_t)pid, SIGKILL);
	}
}

void sb_cgroup_destroy(struct sb_cgroup *cg)
{
	if (!cg->active)
		return;
	/* the last tasks may still be leaving the cgroup after they were reaped */
	for (int i = 0; i < 200; i++) {
		if (!rmdir(cg->path) || errno != EBUSY)
			break;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	cg->active = 0;
}
