/* The `slurm` executor: each verification is a batch job whose one job step (srun) runs
 * `kgate verify ... --report json:FILE` on a node, with --gres=gpu:1 where the backend needs a GPU
 * (Slurm then pins the step with CUDA_VISIBLE_DEVICES). `sbatch --parsable --wait` is one child
 * process per job: the job id comes first on its stdout, and it exits when the job ends. The
 * report comes back through the search's output directory, which must be on a file system the
 * nodes share at the same path. An interrupt (SIGINT, SIGTERM, SIGHUP) cancels every job with
 * scancel before the search stops, so nothing keeps running on the cluster. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agents/executor.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/resolve.h"
#include "verifier/plan/torchtask.h"

#define MAX_SLOTS 256
#define MAX_REPORT (64u << 20)
#define DEFAULT_JOBS 4

/* Single-quoted for sh: every ' becomes '\''. */
static int quote(kg_buf *b, const char *s)
{
	int rc = kg_buf_append(b, "'", 1);
	for (const char *p = s; *p && !rc; p++)
		rc = *p == '\'' ? kg_buf_append(b, "'\\''", 4) : kg_buf_append(b, p, 1);
	return rc ? rc : kg_buf_append(b, "'", 1);
}

int kg_slurm_script(const struct kg_slurm_job *j, kg_buf *out)
{
	char num[32];
	int rc = kg_buf_printf(out, "#!/bin/sh\n# kgate: one verification, as one job step\nexec srun --ntasks=1%s ",
			       j->gpu ? " --gres=gpu:1" : "");
	const char *args[] = {j->exe, "verify", j->task, j->candidate, "--backend", j->backend, "--quiet", "--report"};
	for (size_t i = 0; i < KG_ARRAY_LEN(args) && !rc; i++)
		if (!(rc = quote(out, args[i])))
			rc = kg_buf_append(out, " ", 1);
	char rep[PATH_MAX + 8];
	snprintf(rep, sizeof(rep), "json:%s", j->report);
	if (!rc)
		rc = quote(out, rep);
	if (!rc && j->policy && j->policy[0] && !(rc = kg_buf_printf(out, " --policy ")))
		rc = quote(out, j->policy);
	if (!rc && j->dims && j->dims[0] && !(rc = kg_buf_printf(out, " --dims ")))
		rc = quote(out, j->dims);
	if (!rc && j->iterations >= 0) {
		snprintf(num, sizeof(num), "%d", j->iterations);
		rc = kg_buf_printf(out, " --iterations %s", num);
	}
	if (!rc && j->trials > 0) {
		snprintf(num, sizeof(num), "%d", j->trials);
		rc = kg_buf_printf(out, " --trials %s", num);
	}
	if (!rc && j->no_cache)
		rc = kg_buf_printf(out, " --no-cache");
	return rc ? rc : kg_buf_append(out, "\n", 1);
}

int kg_slurm_sbatch_argv(const struct kg_slurm_job *j, char store[][1024], const char **argv, int max)
{
	int n = 0, s = 0;
#define ARG(...)                                                                    \
	do {                                                                        \
		if (n < max - 1) {                                                  \
			snprintf(store[s], 1024, __VA_ARGS__);                      \
			argv[n++] = store[s++];                                     \
		}                                                                   \
	} while (0)
	ARG("sbatch");
	ARG("--parsable");
	ARG("--wait");
	ARG("--job-name=kgate-verify");
	ARG("--ntasks=1");
	ARG("--output=%s", j->log);
	if (j->partition && j->partition[0])
		ARG("--partition=%s", j->partition);
	if (j->gpu)
		ARG("--gres=gpu:1");
	if (j->timeout_s > 0)
		ARG("--time=%d", (j->timeout_s + 59) / 60);
	/* More options for the site (account, QoS, constraints), split at white space. */
	char extra[1024];
	snprintf(extra, sizeof(extra), "%s", j->extra ? j->extra : "");
	for (char *save = NULL, *t = strtok_r(extra, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
		ARG("%s", t);
	ARG("%s", j->script);
#undef ARG
	argv[n] = NULL;
	return n;
}

/* ---- running ---- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

struct slot {
	pid_t pid; /* sbatch --wait */
	int fd; /* its stdout: the job id */
	int job;
	uint64_t start;
	char raw[64], jobid[64]; /* sbatch's stdout so far, and the job id in it */
	size_t rawlen;
	char report[PATH_MAX], log[PATH_MAX];
};

/* A path kgate verify on a node can open: absolute. Names (a task or policy by name) stay as
 * they are; a manifest or a module (PROBLEM.py) in the working directory is a path. */
static void absolute(const char *in, char *out, size_t outsz)
{
	char *r = in && (strchr(in, '/') || strstr(in, ".yaml") || kg_task_is_module(in)) ? realpath(in, NULL) : NULL;
	snprintf(out, outsz, "%s", r ? r : in ? in : "");
	free(r);
}

static int start_job(struct kg_executor *x, const struct kg_verify_opts *base, const struct kg_backend *be,
		     struct kg_vjob *job, int idx, int timeout_s, struct slot *sl, kg_error *e)
{
	static unsigned counter;
	char task[PATH_MAX], cand[PATH_MAX], pol[PATH_MAX], script[PATH_MAX], store[64][1024];
	const char *argv[64];
	kg_buf text = {0};
	int rc = 0, p[2] = {-1, -1};
	const char *base_name = strrchr(job->path, '/');
	base_name = base_name ? base_name + 1 : job->path;
	memset(sl, 0, sizeof(*sl));
	/* The file names carry the candidate, this process and a counter: unique in a shared
	 * directory, and readable when someone looks at the queue's logs. */
	snprintf(script, sizeof(script), "%s/slurm/%.16s-%d-%u.sh", x->outdir, base_name, (int)getpid(), counter);
	snprintf(sl->report, sizeof(sl->report), "%s/slurm/%.16s-%d-%u.report.json", x->outdir, base_name,
		 (int)getpid(), counter);
	snprintf(sl->log, sizeof(sl->log), "%s/slurm/%.16s-%d-%u.log", x->outdir, base_name, (int)getpid(), counter);
	counter++;
	absolute(base->task, task, sizeof(task));
	absolute(job->path, cand, sizeof(cand));
	absolute(base->policy, pol, sizeof(pol));
	struct kg_slurm_job j = {
		.exe = x->exe,
		.task = task,
		.dims = base->dims,
		.candidate = cand,
		.policy = base->policy ? pol : NULL,
		.backend = be->name,
		.iterations = base->iterations,
		.trials = base->trials,
		.no_cache = base->no_cache,
		.gpu = be->needs_gpu,
		.timeout_s = timeout_s,
		.partition = x->partition,
		.extra = x->slurm_args,
		.script = script,
		.report = sl->report,
		.log = sl->log,
	};
	unlink(sl->report);
	if ((rc = kg_slurm_script(&j, &text)) || (rc = kg_write_file(script, text.data, text.len, 0755, e)))
		goto out;
	kg_slurm_sbatch_argv(&j, store, argv, 64);
	if (pipe2(p, O_CLOEXEC)) {
		rc = kg_err(e, -errno, "pipe: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		rc = kg_err(e, -errno, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		/* Its own process group: a terminal's ^C reaches kgate only, which then cancels. */
		setpgid(0, 0);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "kgate: cannot run sbatch: %s\n", strerror(errno));
		_exit(127);
	}
	close(p[1]);
	p[1] = -1;
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	sl->pid = pid;
	sl->fd = p[0];
	p[0] = -1;
	sl->job = idx;
	sl->start = kg_now_ns();
out:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	kg_buf_free(&text);
	return rc;
}

static void run_scancel(const char *const *ids, int n)
{
	const char *argv[MAX_SLOTS + 3];
	int k = 0;
	argv[k++] = "scancel";
	for (int i = 0; i < n; i++)
		argv[k++] = ids[i];
	argv[k] = NULL;
	if (n == 0)
		return;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
}

/* sbatch --parsable prints "id" or "id;cluster" when the job is submitted: the id is the leading
 * digits of what has come so far. */
static void read_jobid(struct slot *sl)
{
	char buf[64];
	ssize_t r;
	while ((r = read(sl->fd, buf, sizeof(buf))) > 0) {
		size_t k = (size_t)r, room = sizeof(sl->raw) - 1 - sl->rawlen;
		memcpy(sl->raw + sl->rawlen, buf, k < room ? k : room);
		sl->rawlen += k < room ? k : room;
	}
	size_t d = strspn(sl->raw, "0123456789");
	snprintf(sl->jobid, d + 1 < sizeof(sl->jobid) ? d + 1 : sizeof(sl->jobid), "%s", sl->raw);
}

/* The job's outcome: its report, else what its log and sbatch's status say. */
static void collect(struct slot *sl, int status, struct kg_vjob *job, const char *why)
{
	job->seconds = (double)(kg_now_ns() - sl->start) / 1e9;
	char *rep = NULL, *log = NULL;
	size_t len = 0;
	if (why) {
		snprintf(job->error, sizeof(job->error), "%s", why);
	} else if (!kg_read_file(sl->report, MAX_REPORT, &rep, &len, NULL) && len > 2) {
		job->report = rep;
		rep = NULL;
	} else {
		int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		kg_read_file(sl->log, 1 << 20, &log, &len, NULL);
		/* The last line of the log says why (kgate's own error, or srun's). */
		const char *last = "";
		if (log) {
			while (len && (log[len - 1] == '\n' || log[len - 1] == '\r'))
				log[--len] = '\0';
			const char *nl = strrchr(log, '\n');
			last = nl ? nl + 1 : log;
		}
		job->usage = code == KG_EXIT_USAGE;
		snprintf(job->error, sizeof(job->error), "Slurm job %s ended without a report (exit %d)%s%.700s",
			 sl->jobid[0] ? sl->jobid : "?", code, *last ? ": " : "", last);
	}
	free(rep);
	free(log);
	close(sl->fd);
	sl->pid = 0;
}

static int slurm_default_jobs(struct kg_executor *x, const struct kg_backend *be)
{
	(void)x;
	(void)be;
	return DEFAULT_JOBS;
}

static int slurm_run(struct kg_executor *x, const struct kg_verify_opts *base, struct kg_vjob *jobs, int n,
		     int max_workers, int timeout_s, kg_vjob_done_fn done, void *ctx, kg_error *e)
{
	const struct kg_backend *be = NULL;
	char dir[PATH_MAX + 8];
	int rc = 0, next = 0, running = 0, stop = 0;
	if (n <= 0)
		return 0;
	if (kg_resolve_backend(base->backend, jobs[0].path, &be, e))
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%s/slurm", x->outdir);
	if ((rc = kg_mkdirs(dir, 0755, e)))
		return rc;
	if (max_workers < 1)
		max_workers = 1;
	if (max_workers > MAX_SLOTS)
		max_workers = MAX_SLOTS;
	static struct slot sl[MAX_SLOTS];
	memset(sl, 0, sizeof(sl));
	struct sigaction sa = {.sa_handler = on_signal}, old[3];
	const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
	sigemptyset(&sa.sa_mask);
	interrupted = 0;
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	char timeout_why[160];
	snprintf(timeout_why, sizeof(timeout_why), "verification did not finish within %d s; its Slurm job was cancelled",
		 timeout_s);
	while (((next < n && !stop) || running) && !interrupted) {
		for (int i = 0; i < max_workers && next < n && !stop && !interrupted; i++) {
			if (sl[i].pid)
				continue;
			if ((rc = start_job(x, base, be, &jobs[next], next, timeout_s, &sl[i], e)))
				stop = 1;
			else
				next++, running++;
		}
		struct pollfd pfd[MAX_SLOTS];
		int np = 0;
		for (int i = 0; i < max_workers; i++)
			if (sl[i].pid)
				pfd[np++] = (struct pollfd){.fd = sl[i].fd, .events = POLLIN};
		poll(pfd, (nfds_t)np, 200);
		for (int i = 0; i < max_workers && !interrupted; i++) {
			if (!sl[i].pid)
				continue;
			read_jobid(&sl[i]);
			int st = 0;
			pid_t w = waitpid(sl[i].pid, &st, WNOHANG);
			const char *why = NULL;
			if (w == 0 && timeout_s > 0 && kg_now_ns() - sl[i].start > (uint64_t)timeout_s * 1000000000ull) {
				const char *id = sl[i].jobid;
				if (*id)
					run_scancel(&id, 1);
				kill(sl[i].pid, SIGTERM);
				while (waitpid(sl[i].pid, &st, 0) < 0 && errno == EINTR)
					;
				why = timeout_why;
				w = sl[i].pid;
			}
			if (w != sl[i].pid)
				continue;
			read_jobid(&sl[i]);
			struct kg_vjob *job = &jobs[sl[i].job];
			collect(&sl[i], st, job, why);
			running--;
			if (done)
				done(job, ctx);
		}
	}
	if (interrupted) {
		/* Cancel what was submitted, then end the sbatch processes (which would otherwise wait on
		 * cancelled jobs); nothing of this search keeps running anywhere. */
		const char *ids[MAX_SLOTS];
		int k = 0;
		for (int i = 0; i < max_workers; i++)
			if (sl[i].pid) {
				read_jobid(&sl[i]);
				if (sl[i].jobid[0])
					ids[k++] = sl[i].jobid;
			}
		run_scancel(ids, k);
		for (int i = 0; i < max_workers; i++)
			if (sl[i].pid) {
				kill(sl[i].pid, SIGTERM);
				int st;
				while (waitpid(sl[i].pid, &st, 0) < 0 && errno == EINTR)
					;
				close(sl[i].fd);
				snprintf(jobs[sl[i].job].error, sizeof(jobs[sl[i].job].error), "interrupted; Slurm job cancelled");
				sl[i].pid = 0;
			}
		rc = kg_err(e, -EINTR, "interrupted by SIG%s: %d Slurm job%s cancelled (scancel)",
			    sigabbrev_np(interrupted) ? sigabbrev_np(interrupted) : "?", k, k == 1 ? "" : "s");
	}
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	for (int i = next; i < n; i++)
		if (!jobs[i].error[0])
			snprintf(jobs[i].error, sizeof(jobs[i].error), "not verified: %s", e && e->msg[0] ? e->msg : "not started");
	return rc;
}

static void slurm_destroy(struct kg_executor *x)
{
	free(x);
}

static const struct kg_executor_ops slurm_ops = {
	.name = "slurm",
	.default_jobs = slurm_default_jobs,
	.run = slurm_run,
	.destroy = slurm_destroy,
};

/* ---- the seam ---- */

extern const struct kg_executor_ops kg_executor_local;

const char *kg_executor_names(void)
{
	return "local, slurm";
}

int kg_executor_open(const struct kg_executor_opts *o, struct kg_executor **out, kg_error *e)
{
	const struct kg_executor_ops *ops = !o->name || !strcmp(o->name, "local") ? &kg_executor_local
					    : !strcmp(o->name, "slurm")		   ? &slurm_ops
											   : NULL;
	*out = NULL;
	if (!ops)
		return kg_err(e, -EINVAL, "unknown executor '%s' (known: %s)", o->name, kg_executor_names());
	struct kg_executor *x = calloc(1, sizeof(*x));
	if (!x)
		return kg_err(e, -ENOMEM, "out of memory");
	x->ops = ops;
	x->o = *o;
	snprintf(x->partition, sizeof(x->partition), "%s", o->partition ? o->partition : "");
	snprintf(x->slurm_args, sizeof(x->slurm_args), "%s", o->slurm_args ? o->slurm_args : "");
	if (ops == &slurm_ops) {
		/* The nodes open these paths: absolute, and the same on every node (a shared file system). */
		char *r = realpath(o->outdir, NULL);
		if (!r) {
			int rc = kg_err(e, -errno, "%s: %s", o->outdir, strerror(errno));
			free(x);
			return rc;
		}
		snprintf(x->outdir, sizeof(x->outdir), "%s", r);
		free(r);
		ssize_t len = o->exe ? -1 : readlink("/proc/self/exe", x->exe, sizeof(x->exe) - 1);
		if (o->exe)
			absolute(o->exe, x->exe, sizeof(x->exe));
		else if (len > 0)
			x->exe[len] = '\0';
		else {
			free(x);
			return kg_err(e, -errno, "cannot find the kgate binary for the nodes: %s", strerror(errno));
		}
	} else {
		snprintf(x->outdir, sizeof(x->outdir), "%s", o->outdir ? o->outdir : ".");
	}
	*out = x;
	return 0;
}

void kg_executor_close(struct kg_executor *x)
{
	if (x)
		x->ops->destroy(x);
}
