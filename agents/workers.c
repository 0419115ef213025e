/* The `local` executor: each kg_verify runs in its own forked worker (the sandbox forks, and the
 * verifier keeps per-process state, so threads are not an option), which sends the JSON report
 * back over a pipe. On a backend that needs a GPU each worker slot is pinned to one GPU with
 * CUDA_VISIBLE_DEVICES, for any number of GPUs. */
#include "agents/executor.h"
#include "verifier/plan/resolve.h"
#include "verifier/report/report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_WORKERS 256
#define MAX_REPORT (64u << 20)

static int valid_gpu(const char *t)
{
	if (!strncmp(t, "GPU-", 4) || !strncmp(t, "MIG-", 4))
		return t[4] != '\0';
	for (const char *c = t; *c; c++)
		if (*c < '0' || *c > '9')
			return 0;
	return *t != '\0';
}

int kg_gpu_parse_visible(const char *v, char ids[][32], int max)
{
	char buf[1024];
	int n = 0;
	snprintf(buf, sizeof(buf), "%s", v ? v : "");
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		size_t len = strlen(t);
		while (len && t[len - 1] == ' ')
			t[--len] = '\0';
		if (!len)
			continue;
		if (!valid_gpu(t) || len >= 32)
			break; /* the runtime ignores everything from an invalid entry on */
		snprintf(ids[n++], 32, "%s", t);
	}
	return n;
}

int kg_gpu_scan_dev(const char *dev, char ids[][32], int max)
{
	DIR *d = opendir(dev);
	if (!d)
		return 0;
	static unsigned char found[KG_MAX_GPUS];
	memset(found, 0, sizeof(found));
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		if (strncmp(de->d_name, "nvidia", 6) || de->d_name[6] < '0' || de->d_name[6] > '9')
			continue;
		long i = strtol(de->d_name + 6, &end, 10);
		if (!*end && i >= 0 && i < KG_MAX_GPUS)
			found[i] = 1;
	}
	closedir(d);
	int n = 0;
	for (int i = 0; i < KG_MAX_GPUS && n < max; i++)
		if (found[i])
			snprintf(ids[n++], 32, "%d", i);
	return n;
}

int kg_gpu_list(char ids[][32], int max)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	return v ? kg_gpu_parse_visible(v, ids, max) : kg_gpu_scan_dev("/dev", ids, max);
}

const char *kg_gpu_for_slot(char ids[][32], int n, int slot)
{
	return n > 0 && slot >= 0 ? ids[slot % n] : NULL;
}

int kg_default_jobs(const struct kg_backend *be)
{
	if (be && be->needs_gpu) {
		static char ids[KG_MAX_GPUS][32];
		int n = kg_gpu_list(ids, KG_MAX_GPUS);
		return n > 0 ? n : 1;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : (int)n;
}

struct worker {
	pid_t pid;
	int fd;
	int job;
	uint64_t start;
	kg_buf out;
};

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* The worker: one verification, the report down the pipe, _exit (never exit: the parent's stdio
 * buffers and atexit handlers are not ours to run). First byte: 'R' report, 'U' usage error. */
static void worker_main(const struct kg_verify_opts *base, const struct kg_vjob *job, int fd, const char *gpu)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (gpu)
		setenv("CUDA_VISIBLE_DEVICES", gpu, 1);
	struct kg_verify_opts o = *base;
	o.candidate = job->path;
	o.progress = 0;
	struct kg_verdict v;
	kg_error e = {0};
	memset(&v, 0, sizeof(v));
	if (kg_verify(&o, &v, &e)) {
		write_all(fd, "U", 1);
		write_all(fd, e.msg, strlen(e.msg));
	} else {
		char *s = kg_report_json_string(&v);
		write_all(fd, "R", 1);
		if (s)
			write_all(fd, s, strlen(s));
		free(s);
	}
	kg_verdict_free(&v);
	close(fd);
	_exit(0);
}

static int start(const struct kg_verify_opts *base, struct kg_vjob *job, int idx, struct worker *w, const char *gpu,
		 kg_error *e)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return kg_err(e, -errno, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int rc = -errno;
		close(p[0]);
		close(p[1]);
		return kg_err(e, rc, "fork: %s", strerror(-rc));
	}
	if (pid == 0) {
		close(p[0]);
		worker_main(base, job, p[1], gpu);
	}
	close(p[1]);
	*w = (struct worker){.pid = pid, .fd = p[0], .job = idx, .start = kg_now_ns()};
	return 0;
}

/* Collects a finished worker into its job; kill_why (non-NULL) kills it first and says why. */
static void finish(struct worker *w, struct kg_vjob *job, const char *kill_why)
{
	int st = 0;
	if (kill_why)
		kill(w->pid, SIGKILL);
	while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR)
		;
	close(w->fd);
	job->seconds = (double)(kg_now_ns() - w->start) / 1e9;
	const char *s = w->out.data;
	if (kill_why)
		snprintf(job->error, sizeof(job->error), "%s", kill_why);
	else if (WIFSIGNALED(st))
		snprintf(job->error, sizeof(job->error), "verification worker killed by SIG%s",
			 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
	else if (!s || (s[0] != 'R' && s[0] != 'U'))
		snprintf(job->error, sizeof(job->error), "verification worker ended without a report (status %d)",
			 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	else if (s[0] == 'U') {
		job->usage = 1;
		snprintf(job->error, sizeof(job->error), "%s", s + 1);
	} else if (w->out.len < 3) {
		snprintf(job->error, sizeof(job->error), "verification worker sent an empty report");
	} else {
		job->report = malloc(w->out.len);
		if (job->report)
			memcpy(job->report, s + 1, w->out.len); /* includes the NUL kg_buf keeps */
		else
			snprintf(job->error, sizeof(job->error), "out of memory");
	}
	kg_buf_free(&w->out);
	w->pid = 0;
}

int kg_verify_jobs(const struct kg_verify_opts *base, struct kg_vjob *jobs, int n, int max_workers, int timeout_s,
		   kg_vjob_done_fn done, void *ctx, kg_error *e)
{
	if (max_workers < 1)
		max_workers = 1;
	if (max_workers > MAX_WORKERS)
		max_workers = MAX_WORKERS;
	if (max_workers > n)
		max_workers = n;
	static char gpus[MAX_WORKERS][32];
	/* Resolved as kg_verify will resolve it; an unknown name pins nothing (kg_verify refuses it). */
	const struct kg_backend *be = NULL;
	if (n > 0 && kg_resolve_backend(base->backend, jobs[0].path, &be, NULL))
		be = NULL;
	int n_gpu = be && be->needs_gpu ? kg_gpu_list(gpus, MAX_WORKERS) : 0;
	struct worker w[MAX_WORKERS];
	memset(w, 0, sizeof(w));
	int next = 0, running = 0, rc = 0, stop = 0;
	char timeout_why[128];
	snprintf(timeout_why, sizeof(timeout_why), "verification did not finish within %d s; its worker was killed",
		 timeout_s);
	while ((next < n && !stop) || running) {
		/* Fill free slots; slot i uses GPU i (mod the GPUs there are). */
		for (int i = 0; i < max_workers && next < n && !stop; i++) {
			if (w[i].pid)
				continue;
			if ((rc = start(base, &jobs[next], next, &w[i], kg_gpu_for_slot(gpus, n_gpu, i), e)))
				stop = 1; /* no new workers; the running ones are drained */
			else
				next++, running++;
		}
		if (!running)
			break;
		struct pollfd pfd[MAX_WORKERS];
		int slot[MAX_WORKERS], np = 0;
		for (int i = 0; i < max_workers; i++)
			if (w[i].pid) {
				pfd[np] = (struct pollfd){.fd = w[i].fd, .events = POLLIN};
				slot[np++] = i;
			}
		int pr = poll(pfd, (nfds_t)np, 1000);
		if (pr < 0 && errno != EINTR) {
			rc = kg_err(e, -errno, "poll: %s", strerror(errno));
			for (int i = 0; i < max_workers; i++)
				if (w[i].pid)
					finish(&w[i], &jobs[w[i].job], "verification abandoned: poll failed");
			break;
		}
		for (int k = 0; k < np; k++) {
			struct worker *x = &w[slot[k]];
			int ended = 0;
			const char *why = NULL;
			if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) {
				char buf[65536];
				ssize_t r = read(x->fd, buf, sizeof(buf));
				if (r > 0 && x->out.len + (size_t)r <= MAX_REPORT && !kg_buf_append(&x->out, buf, (size_t)r))
					continue;
				if (r < 0 && errno == EINTR)
					continue;
				ended = 1;
				if (r > 0)
					why = "verification report too large; its worker was killed";
			}
			if (!ended && timeout_s > 0 && kg_now_ns() - x->start > (uint64_t)timeout_s * 1000000000ull)
				ended = 1, why = timeout_why;
			if (!ended)
				continue;
			struct kg_vjob *job = &jobs[x->job];
			finish(x, job, why);
			running--;
			if (done)
				done(job, ctx);
		}
	}
	for (int i = next; i < n; i++)
		snprintf(jobs[i].error, sizeof(jobs[i].error), "not verified: %s", e ? e->msg : "cannot start a worker");
	return rc;
}

/* ---- the executor seam ---- */

static int local_default_jobs(struct kg_executor *x, const struct kg_backend *be)
{
	(void)x;
	return kg_default_jobs(be);
}

static int local_run(struct kg_executor *x, const struct kg_verify_opts *base, struct kg_vjob *jobs, int n,
		     int max_workers, int timeout_s, kg_vjob_done_fn done, void *ctx, kg_error *e)
{
	(void)x;
	return kg_verify_jobs(base, jobs, n, max_workers, timeout_s, done, ctx, e);
}

static void local_destroy(struct kg_executor *x)
{
	free(x);
}

const struct kg_executor_ops kg_executor_local = {
	.name = "local",
	.default_jobs = local_default_jobs,
	.run = local_run,
	.destroy = local_destroy,
};
