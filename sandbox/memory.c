/* The supervisor's own account of a sandboxed tree's memory, where no cgroup memory.max bounds it
 * (the host delegates no writable cgroup v2 tree). RLIMIT_AS and RLIMIT_DATA bound one process's
 * address space or private data, never what several mappings or processes share: a program
 * without RLIMIT_AS (an interpreter, a GPU driver) held gigabytes in shared anonymous mappings.
 *
 * What is counted, for the whole tree (every process of the session the child made; the pid-ns
 * init shares the caller's memory and is left out):
 *   - each process's private anonymous pages, resident or swapped, and its page tables
 *     (/proc/PID/status: RssAnon, VmSwap, VmPTE; cheap, read at every sample);
 *   - each object of the kernel's shmem mount (a shared anonymous mapping, /dev/zero mapped shared,
 *     a memfd, a SysV segment) once, however many mappings and processes hold it, at the most it
 *     was ever seen to hold while it lives: the extent its mappings cover, its allocated blocks
 *     where those can be read (an fd to it; /proc/PID/map_files for a privileged caller), and the
 *     length a shared mmap created it with. A page it holds stays in the object after the
 *     mapping that touched it is trimmed (munmap of a part, mremap, MADV_DONTNEED), where no
 *     resident-size figure sees it any more, so the figure never goes down while the object lives.
 * Not counted: the objects the caller handed over (the spec's fds: kgate's arena, sized by the
 * caller and sealed against growth); files (page cache, reclaimable; /tmp is a bounded tmpfs);
 * device memory and the driver's own pages (a GPU runner's /dev/nvidia* mappings are the
 * device's apertures and the driver's pinned pages: never anonymous or shmem pages, so they cannot
 * be mistaken for the program's host memory; bounded by the driver and the device, not here).
 *
 * When: a light sample (one status read per process) every SB_MEM_LIGHT_NS while the caller waits
 * in kg_sb_wait_fd, and at every stop the caller makes (kg_sb_check_memory); a full scan (the
 * session's processes, their maps and fds) every SB_MEM_FULL_NS, whenever shared mmaps are pending
 * or the shmem pages grew, and before any verdict. A shared mmap reaches the supervisor before it
 * runs (the run and compile filters route MAP_SHARED to it), so the object it makes is charged at
 * its full length at once, and a mapping over the bound never happens. Between light samples a
 * process can grow its private pages at the rate the kernel faults them in (some GB/s per thread),
 * so the bound is held to within that rate times SB_MEM_LIGHT_NS; RLIMIT_AS or RLIMIT_DATA still
 * bounds one process's private pages at once where its spec sets them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sb_int.h"

#define SB_MEM_LIGHT_NS (10 * 1000000ull)
#define SB_MEM_FULL_NS (250 * 1000000ull)
/* a shared mmap let through is done by the time its thread runs again: one not seen after this
 * long was unmapped before any scan saw it */
#define SB_MEM_PENDING_NS (1000 * 1000000ull)
/* growth of the shmem pages the last scan did not explain that calls for a new one */
#define SB_MEM_SHM_SLACK (16ull << 20)
#define MiB (1024.0 * 1024.0)

/* st_dev of the kernel's internal shmem mount, which every memfd, shared anonymous mapping and
 * SysV segment lives on (learnt once from a memfd of our own) */
static uint64_t shm_dev;
static pthread_once_t shm_dev_once = PTHREAD_ONCE_INIT;

static void shm_dev_probe(void)
{
	int fd = memfd_create("kgate-shm-probe", MFD_CLOEXEC);
	struct stat st;
	if (fd >= 0 && !fstat(fd, &st))
		shm_dev = (uint64_t)st.st_dev;
	if (fd >= 0)
		close(fd);
}

void sb_mem_init(struct kg_sb_child *c, const struct kg_sb_spec *s)
{
	struct sb_mem *m = &c->mem;
	memset(m, 0, sizeof(*m));
	m->bound = c->plan.lim.mem_bytes;
	m->on = m->bound && !c->plan.sanitize && !(c->active & KG_SB_LAYER_CGROUP);
	m->session = c->pid;
	m->skip = c->pidns_init ? c->pid : 0;
	pthread_once(&shm_dev_once, shm_dev_probe);
	m->shm_dev = shm_dev;
	for (int i = 0; i < s->n_fds && m->n_handed < (int)KG_ARRAY_LEN(m->handed); i++) {
		struct stat st;
		if (!fstat(s->fds[i], &st) && S_ISREG(st.st_mode)) {
			m->handed[m->n_handed].dev = (uint64_t)st.st_dev;
			m->handed[m->n_handed++].ino = (uint64_t)st.st_ino;
		}
	}
	m->next_light_ns = m->next_full_ns = kg_now_ns();
}

void sb_mem_free(struct sb_mem *m)
{
	free(m->objs);
	m->objs = NULL;
	m->n_objs = 0;
}

uint64_t sb_mem_due_ns(const struct kg_sb_child *c)
{
	return c->mem.on && !c->exited && !c->killed && !c->reaped ? c->mem.next_light_ns : UINT64_MAX;
}

static int handed(const struct sb_mem *m, uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < m->n_handed; i++)
		if (m->handed[i].dev == dev && m->handed[i].ino == ino)
			return 1;
	return 0;
}

static int read_file(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t have = 0;
	for (;;) {
		ssize_t r = read(fd, buf + have, n - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
		if (have == n - 1)
			break;
	}
	close(fd);
	buf[have] = '\0';
	return have ? 0 : -ESRCH;
}

/* kB of a "Name:\t  123 kB" line in a status file, 0 when absent */
static uint64_t status_kb(const char *buf, const char *name)
{
	const char *s = strstr(buf, name);
	return s ? strtoull(s + strlen(name), NULL, 10) * 1024 : 0;
}

/* One process's private anonymous pages, swap and page tables, and its shmem pages; -ESRCH when
 * it is gone or no longer of this tree (its pid recycled: its session is another). */
static int read_status(const struct sb_mem *m, pid_t pid, uint64_t *anon, uint64_t *shm)
{
	char path[48], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_file(path, buf, sizeof(buf)))
		return -ESRCH;
	/* the first NSsid is the session as our pid namespace numbers it */
	const char *sid = strstr(buf, "\nNSsid:");
	if (!sid || strtol(sid + 7, NULL, 10) != m->session)
		return -ESRCH;
	*anon = status_kb(buf, "\nRssAnon:") + status_kb(buf, "\nVmSwap:") + status_kb(buf, "\nVmPTE:");
	*shm = status_kb(buf, "\nRssShmem:");
	return 0;
}

/* The tree's processes: every process in the child's session (a sandboxed process cannot leave
 * it: setsid is in no profile), less the pid-ns init. */
static void discover(struct sb_mem *m)
{
	DIR *d = opendir("/proc");
	if (!d)
		return;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < SB_MEM_MAX_PROCS) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
		if (pid == m->skip)
			continue;
		char path[300], buf[1024];
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		if (read_file(path, buf, sizeof(buf)))
			continue;
		/* pid (comm) state ppid pgrp session ...: comm may hold anything, up to the last ')' */
		const char *p = strrchr(buf, ')');
		long sid = 0;
		if (!p || sscanf(p + 1, " %*c %*d %*d %ld", &sid) != 1 || sid != m->session)
			continue;
		m->procs[n++] = pid;
	}
	closedir(d);
	m->n_procs = n;
}

/* One piece of a shmem object the tree holds: a mapped range of it, or (fd) all of its blocks. */
struct piece {
	uint64_t dev, ino, lo, hi, blocks;
};

struct scan {
	struct piece *p;
	int n, cap;
};

static int add_piece(struct scan *s, struct piece pc)
{
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 64;
		struct piece *np = realloc(s->p, (size_t)cap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		s->p = np;
		s->cap = cap;
	}
	s->p[s->n++] = pc;
	return 0;
}

/* Allocated bytes of the object behind a mapping, where the caller may open /proc/PID/map_files
 * (CAP_SYS_ADMIN in the initial user namespace); 0 otherwise. */
static uint64_t mapped_blocks(struct sb_mem *m, pid_t pid, const char *range, int len)
{
	if (m->map_files < 0)
		return 0;
	char path[96];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/map_files/%.*s", (int)pid, len, range);
	if (stat(path, &st)) {
		if (errno == EPERM || errno == EACCES)
			m->map_files = -1;
		return 0;
	}
	m->map_files = 1;
	return (uint64_t)st.st_blocks * 512;
}

/* The shmem mappings of one process. */
static int scan_maps(struct sb_mem *m, pid_t pid, struct scan *s)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0; /* gone meanwhile */
	char line[512];
	int rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		/* start-end perms offset major:minor inode [path] */
		char *q = line, *end;
		uint64_t lo = strtoull(q, &end, 16);
		if (*end != '-')
			goto skip;
		uint64_t hi = strtoull(end + 1, &end, 16);
		int range_len = (int)(end - line);
		if (*end != ' ' || !(q = strchr(end + 1, ' ')))
			goto skip;
		uint64_t off = strtoull(q + 1, &end, 16);
		unsigned maj = (unsigned)strtoul(end + 1, &end, 16);
		if (*end != ':')
			goto skip;
		unsigned min = (unsigned)strtoul(end + 1, &end, 16);
		uint64_t ino = strtoull(end + 1, &end, 10);
		uint64_t dev = (uint64_t)makedev(maj, min);
		if (ino && dev == m->shm_dev && !handed(m, dev, ino) && hi > lo)
			rc = add_piece(s, (struct piece){dev, ino, off, off + (hi - lo), mapped_blocks(m, pid, line, range_len)});
	skip:
		/* the rest of an over-long line (a path) */
		while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
			;
	}
	fclose(f);
	return rc;
}

/* The shmem objects one process holds open (a memfd filled by write() and never mapped). */
static int scan_fds(struct sb_mem *m, pid_t pid, struct scan *s)
{
	char path[48];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int rc = 0;
	struct dirent *de;
	while (!rc && (de = readdir(d))) {
		struct stat st;
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || fstatat(dirfd(d), de->d_name, &st, 0))
			continue;
		if (S_ISREG(st.st_mode) && (uint64_t)st.st_dev == m->shm_dev &&
		    !handed(m, (uint64_t)st.st_dev, (uint64_t)st.st_ino))
			rc = add_piece(s, (struct piece){(uint64_t)st.st_dev, (uint64_t)st.st_ino, 0, 0,
							(uint64_t)st.st_blocks * 512});
	}
	closedir(d);
	return rc;
}

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int pend_desc(const void *a, const void *b)
{
	const struct sb_mem_pend *x = a, *y = b;
	return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

static const struct sb_mem_obj *find_obj(const struct sb_mem *m, uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < m->n_objs; i++)
		if (m->objs[i].dev == dev && m->objs[i].ino == ino)
			return &m->objs[i];
	return NULL;
}

/* The full scan: the tree's processes, their shmem mappings and fds, and from them the objects
 * that live now, each charged at the most it was ever seen to hold (an object no longer seen is
 * gone: nothing in the tree maps it or holds it open). Pending shared mmaps are matched to the
 * objects that appeared, largest to largest: whichever object is which, their sum is never less
 * than the objects'. The rest stay pending while their mmap may still be on its way (not after
 * a scan of the stopped tree, nor after SB_MEM_PENDING_NS). Returns -ENOMEM, else 0. */
static int full_scan(struct kg_sb_child *c, int stopped, uint64_t now)
{
	struct sb_mem *m = &c->mem;
	struct scan s = {0};
	int rc = 0;
	discover(m);
	for (int i = 0; i < m->n_procs && !rc && m->shm_dev; i++)
		if (!(rc = scan_maps(m, m->procs[i], &s)))
			rc = scan_fds(m, m->procs[i], &s);
	if (rc) {
		free(s.p);
		return rc;
	}
	if (s.n)
		qsort(s.p, (size_t)s.n, sizeof(*s.p), piece_cmp);
	int n_obj = 0;
	for (int i = 0; i < s.n; i++)
		n_obj += !i || s.p[i].dev != s.p[i - 1].dev || s.p[i].ino != s.p[i - 1].ino;
	struct sb_mem_obj *objs = n_obj ? calloc((size_t)n_obj, sizeof(*objs)) : NULL;
	int *fresh = n_obj ? calloc((size_t)n_obj, sizeof(*fresh)) : NULL;
	if (n_obj && (!objs || !fresh)) {
		free(objs);
		free(fresh);
		free(s.p);
		return -ENOMEM;
	}
	int k = -1, n_fresh = 0;
	uint64_t cover_hi = 0, extent = 0, blocks = 0;
	for (int i = 0; i <= s.n; i++) {
		int next = i == s.n || k < 0 || s.p[i].dev != objs[k].dev || s.p[i].ino != objs[k].ino;
		if (next && k >= 0) {
			uint64_t seen = extent > blocks ? extent : blocks;
			if (seen > objs[k].charge)
				objs[k].charge = seen;
		}
		if (i == s.n)
			break;
		const struct piece *p = &s.p[i];
		if (next) {
			objs[++k] = (struct sb_mem_obj){.dev = p->dev, .ino = p->ino};
			cover_hi = extent = blocks = 0;
			const struct sb_mem_obj *old = find_obj(m, p->dev, p->ino);
			if (old)
				objs[k].charge = old->charge;
			else
				fresh[n_fresh++] = k;
		}
		/* the extent its mappings cover, each offset once (pieces come sorted by offset) */
		uint64_t lo = p->lo > cover_hi ? p->lo : cover_hi;
		if (p->hi > lo)
			extent += p->hi - lo;
		if (p->hi > cover_hi)
			cover_hi = p->hi;
		if (p->blocks > blocks)
			blocks = p->blocks;
	}
	free(s.p);
	if (m->n_pend > 1)
		qsort(m->pend, (size_t)m->n_pend, sizeof(m->pend[0]), pend_desc);
	/* the fresh objects, largest first, take the largest pending lengths */
	for (int i = 1; i < n_fresh; i++)
		for (int j = i; j > 0 && objs[fresh[j]].charge > objs[fresh[j - 1]].charge; j--) {
			int t = fresh[j];
			fresh[j] = fresh[j - 1];
			fresh[j - 1] = t;
		}
	int used = 0;
	for (; used < n_fresh && used < m->n_pend; used++)
		if (m->pend[used].len > objs[fresh[used]].charge)
			objs[fresh[used]].charge = m->pend[used].len;
	int kept = 0;
	for (int i = used; i < m->n_pend; i++)
		if (!stopped && now - m->pend[i].ns < SB_MEM_PENDING_NS)
			m->pend[kept++] = m->pend[i];
	m->n_pend = kept;
	free(fresh);
	free(m->objs);
	m->objs = objs;
	m->n_objs = n_obj;
	m->scanned = 1;
	m->next_full_ns = now + SB_MEM_FULL_NS;
	return 0;
}

/* The light sample: each known process's status; gone ones dropped. */
static void light(struct sb_mem *m)
{
	uint64_t anon = 0, shm = 0;
	int n = 0;
	for (int i = 0; i < m->n_procs; i++) {
		uint64_t a, sh;
		if (read_status(m, m->procs[i], &a, &sh))
			continue;
		anon += a;
		shm += sh;
		m->procs[n++] = m->procs[i];
	}
	m->n_procs = n;
	m->anon = anon;
	m->shm_rss = shm;
}

static uint64_t shared_charge(const struct sb_mem *m)
{
	uint64_t t = 0;
	for (int i = 0; i < m->n_objs; i++)
		t += m->objs[i].charge;
	for (int i = 0; i < m->n_pend; i++)
		t += m->pend[i].len;
	return t;
}

static void over(struct kg_sb_child *c, const char *what, uint64_t total)
{
	struct sb_mem *m = &c->mem;
	sb_set_why(c, KG_SB_END_MEMORY,
		   "%s%.0f MiB of memory, over the limit of %.0f MiB: %.0f MiB private (anonymous, swapped, page "
		   "tables) in %d process%s, %.0f MiB shared in %d object%s%s",
		   what, (double)total / MiB, (double)m->bound / MiB, (double)m->anon / MiB, m->n_procs,
		   m->n_procs == 1 ? "" : "es", (double)shared_charge(m) / MiB, m->n_objs + m->n_pend,
		   m->n_objs + m->n_pend == 1 ? "" : "s",
		   m->n_pend ? " (shared mappings just made among them, at their length)" : "");
	c->killed = 1;
	sb_kill_tree(c);
}

int sb_mem_sample(struct kg_sb_child *c, int stopped)
{
	struct sb_mem *m = &c->mem;
	if (!m->on || c->exited || c->killed || c->reaped)
		return 0;
	uint64_t now = kg_now_ns();
	m->next_light_ns = now + SB_MEM_LIGHT_NS;
	int full = !m->scanned || now >= m->next_full_ns || m->n_pend;
	uint64_t total = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (full && full_scan(c, stopped, now))
			full = 0; /* out of memory here: the light figure and the objects known so far */
		light(m);
		/* shmem pages no scan explained (a mapping not made by mmap(MAP_SHARED): a memfd
		 * mapped before the filter, say), or a figure over the bound: look closer first */
		total = m->anon + shared_charge(m);
		if (full || (m->shm_rss <= m->shm_rss_scanned + SB_MEM_SHM_SLACK && total <= m->bound))
			break;
		full = 1;
	}
	if (full)
		m->shm_rss_scanned = m->shm_rss;
	if (total > m->peak)
		m->peak = total;
	if (total <= m->bound)
		return 0;
	over(c, "its processes held ", total);
	return 1;
}

int sb_mem_shared_mmap(struct kg_sb_child *c, pid_t tid, uint64_t len, uint64_t flags, int fd)
{
	struct sb_mem *m = &c->mem;
	if (!m->on || c->exited || c->killed || c->reaped || !len)
		return 0;
	if (!(flags & MAP_ANONYMOUS)) {
		/* a file mapped shared makes shared memory only where it is /dev/zero (a shared anonymous
		 * mapping by another name) or a shmem object of the tree's own; what cannot be looked at
		 * is charged */
		char path[64];
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)tid, fd);
		if (fd < 0)
			return 0; /* EBADF: nothing is mapped */
		if (!stat(path, &st) && !(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 5)) &&
		    !(S_ISREG(st.st_mode) && (uint64_t)st.st_dev == m->shm_dev &&
		      !handed(m, (uint64_t)st.st_dev, (uint64_t)st.st_ino)))
			return 0;
	}
	uint64_t pg = (len + 4095) & ~(uint64_t)4095;
	uint64_t total = m->anon + shared_charge(m) + pg;
	if (total > m->peak)
		m->peak = total;
	if (total > m->bound) {
		char what[96];
		snprintf(what, sizeof(what), "a shared mapping of %.0f MiB (mmap) would have brought it to ",
			 (double)pg / MiB);
		over(c, what, total);
		return 1;
	}
	if (m->n_pend == SB_MEM_MAX_PENDING) {
		m->pend[m->n_pend - 1].len += pg; /* one charge for both: never less */
		m->pend[m->n_pend - 1].ns = kg_now_ns();
	} else {
		m->pend[m->n_pend++] = (struct sb_mem_pend){pg, kg_now_ns()};
	}
	return 0;
}

int kg_sb_check_memory(struct kg_sb_child *c)
{
	if (!c || c->exited || c->reaped)
		return c && (c->exited || c->reaped) ? KG_SB_ENDED : 0;
	return sb_mem_sample(c, 1) ? KG_SB_ENDED : 0;
}
