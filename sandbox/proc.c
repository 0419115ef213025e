/* A sandboxed program's process seen from outside: stopped and resumed by the caller (SIGSTOP and
 * SIGCONT through a pidfd, so a recycled pid is never signalled), its threads listed and their
 * states read from /proc, and its sealed mappings read from /proc/PID/smaps. Everything here is
 * the kernel's account, never the program's: a program may rewrite all of its own memory, but not
 * what the kernel says of its threads and mappings. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sb_int.h"

int kg_sb_proc_attach(struct kg_sb_process *p, pid_t pid, kg_error *e)
{
	memset(p, 0, sizeof(*p));
	p->pidfd = -1;
	if (pid <= 0)
		return kg_err(e, -ESRCH, "sandbox: no process to watch");
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return kg_err(e, -errno, "sandbox: pidfd_open(%d): %s", (int)pid, strerror(errno));
	p->pidfd = fd;
	p->pid = pid;
	return 0;
}

void kg_sb_proc_detach(struct kg_sb_process *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->pid = 0;
	p->stopped = 0;
}

static int send_sig(const struct kg_sb_process *p, int sig)
{
	if (p->pidfd < 0)
		return -ESRCH;
	return syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0) ? -errno : 0;
}

/* The state letter of one task ("R", "S", "T", "t", "Z", ...), '\0' when it is gone. The comm
 * field may hold ')' and spaces: the state follows the last ')'. */
static char task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '\0';
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '\0';
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp[2] : '\0';
}

int kg_sb_proc_tasks(struct kg_sb_process *p, kg_error *e)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)p->pid);
	DIR *d = opendir(path);
	if (!d)
		return kg_err(e, -errno, "sandbox: reading %s: %s", path, strerror(errno));
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		if (n == KG_SB_MAX_TASKS) {
			closedir(d);
			return kg_err(e, -E2BIG, "sandbox: process %d runs more than %d threads", (int)p->pid,
				      KG_SB_MAX_TASKS);
		}
		p->tasks[n++] = (pid_t)atoi(de->d_name);
	}
	closedir(d);
	p->n_tasks = n;
	return n ? 0 : kg_err(e, -ESRCH, "sandbox: process %d has no threads", (int)p->pid);
}

/* 1 when the process has ended (its main thread gone or a zombie), else 0. */
static int ended(const struct kg_sb_process *p)
{
	char s = task_state(p->pid, p->pid);
	return s == '\0' || s == 'Z' || s == 'X';
}

int kg_sb_proc_stop(struct kg_sb_process *p, int timeout_ms, kg_error *e)
{
	int rc = send_sig(p, SIGSTOP);
	if (rc)
		return kg_err(e, rc, "sandbox: stopping process %d: %s", (int)p->pid, strerror(-rc));
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned spin = 0;; spin++) {
		/* Threads come and go until the stop lands: list them on every round, and call the
		 * process stopped only when every thread listed is. */
		if ((rc = kg_sb_proc_tasks(p, e)))
			return ended(p) ? kg_err(e, -ESRCH, "sandbox: process %d ended", (int)p->pid) : rc;
		/* a thread that has exited (gone, a zombie, dead) stops nothing and is no thread of the
		 * process any more: dropped from the list; one still on its way out (running in the
		 * kernel, past signals) holds the stop up until it is gone */
		int all = 1, live = 0;
		for (int i = 0; i < p->n_tasks; i++) {
			char st = task_state(p->pid, p->tasks[i]);
			int dead = st == 'Z' || st == 'X' || st == '\0';
			if (dead && p->tasks[i] == p->pid && ended(p))
				return kg_err(e, -ESRCH, "sandbox: process %d ended", (int)p->pid);
			if (dead && p->tasks[i] != p->pid)
				continue;
			p->tasks[live++] = p->tasks[i];
			/* a main thread that exited alone (the others run on) stops nothing either */
			all &= dead || st == 'T' || st == 't';
		}
		p->n_tasks = live;
		if (all) {
			p->stopped = 1;
			return 0;
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms > timeout_ms)
			return kg_err(e, -ETIMEDOUT, "sandbox: process %d did not stop within %d ms", (int)p->pid,
				      timeout_ms);
		/* a stop lands within microseconds; a thread in uninterruptible sleep takes longer */
		if (spin > 64) {
			struct timespec ts = {0, 50000};
			nanosleep(&ts, NULL);
		} else {
			sched_yield();
		}
	}
}

int kg_sb_proc_cont(struct kg_sb_process *p, kg_error *e)
{
	if (!p->stopped)
		return 0;
	int rc = send_sig(p, SIGCONT);
	p->stopped = 0;
	if (rc && rc != -ESRCH)
		return kg_err(e, rc, "sandbox: resuming process %d: %s", (int)p->pid, strerror(-rc));
	return 0;
}

int kg_sb_proc_task_cpu(const struct kg_sb_process *p, uint64_t *cpu_ns, kg_error *e)
{
	for (int i = 0; i < p->n_tasks; i++) {
		char path[64], buf[128];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)p->pid, (int)p->tasks[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		cpu_ns[i] = 0;
		if (fd < 0) {
			if (errno == ENOENT && i == 0)
				return kg_err(e, -ENOENT, "sandbox: no per-thread CPU time here (%s)", path);
			continue; /* a thread gone since the list: its time is the process's now */
		}
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			cpu_ns[i] = strtoull(buf, NULL, 10); /* the first field: time on a CPU */
		}
	}
	return 0;
}

pid_t kg_sb_proc_outer_tid(const struct kg_sb_process *p, pid_t inner)
{
	for (int i = 0; i < p->n_tasks; i++) {
		char path[64], buf[4096];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)p->pid, (int)p->tasks[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* "NSpid:\t<outer>\t...\t<innermost>": the last number is the tid the program sees */
		char *l = strstr(buf, "\nNSpid:");
		if (!l)
			continue;
		char *end = strchr(l + 1, '\n');
		if (end)
			*end = '\0';
		char *last = strrchr(l, '\t');
		if (last && atoi(last + 1) == (int)inner)
			return p->tasks[i];
	}
	return 0;
}

static int add_range(struct kg_sb_range *out, int n, int max, uint64_t lo, uint64_t hi)
{
	if (n && out[n - 1].hi >= lo && out[n - 1].lo <= lo) {
		if (hi > out[n - 1].hi)
			out[n - 1].hi = hi;
		return n;
	}
	if (n == max)
		return -E2BIG;
	out[n] = (struct kg_sb_range){.lo = lo, .hi = hi};
	return n + 1;
}

int kg_sb_image_ranges(pid_t pid, struct kg_sb_range *out, int max, kg_error *e)
{
	char path[48], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return kg_err(e, -errno, "sandbox: reading %s: %s", path, strerror(errno));
	int n = 0;
	uint64_t mem_lo = UINT64_MAX, mem_hi = 0;
	while (fgets(line, sizeof(line), f) && n >= 0) {
		unsigned long lo, hi;
		char perms[8] = "";
		int off = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &off) < 3)
			continue;
		const char *name = off > 0 ? line + off : "";
		if (!strncmp(name, "/memfd:", 7)) {
			/* the arena: everything from its first file mapping to its last, guard pages too */
			mem_lo = lo < mem_lo ? lo : mem_lo;
			mem_hi = hi > mem_hi ? hi : mem_hi;
		} else if (name[0] == '/' && perms[2] != 'w') {
			n = add_range(out, n, max, lo, hi); /* code, read-only data, RELRO */
		}
	}
	fclose(f);
	if (n >= 0 && mem_hi > mem_lo)
		n = add_range(out, n, max, mem_lo, mem_hi);
	return n < 0 ? kg_err(e, n, "sandbox: more than %d protected ranges in process %d", max, (int)pid) : n;
}

int kg_sb_sealed_ranges(pid_t pid, struct kg_sb_range *out, int max, kg_error *e)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return kg_err(e, -errno, "sandbox: reading %s: %s", path, strerror(errno));
	char line[512];
	unsigned long lo = 0, hi = 0;
	int n = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		/* a mapping's header line: "lo-hi perms offset dev inode path" */
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
			lo = a;
			hi = b;
			continue;
		}
		if (strncmp(line, "VmFlags:", 8))
			continue;
		/* mseal(2) shows as "sl" among the two-letter flags (Linux >= 6.10) */
		int sealed = 0;
		for (char *t = strtok(line + 8, " \n"); t && !sealed; t = strtok(NULL, " \n"))
			sealed = !strcmp(t, "sl");
		if (!sealed || hi <= lo)
			continue;
		if (n && out[n - 1].hi == lo) { /* adjacent sealed mappings: one range */
			out[n - 1].hi = hi;
			continue;
		}
		if (n == max) {
			rc = kg_err(e, -E2BIG, "sandbox: more than %d sealed ranges in process %d", max, (int)pid);
			break;
		}
		out[n++] = (struct kg_sb_range){.lo = lo, .hi = hi};
	}
	fclose(f);
	return rc ? rc : n;
}
