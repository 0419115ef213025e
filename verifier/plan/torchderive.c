/* Deriving the tasks of many KernelBench-format modules (torchderive.h): a few sandboxed torch
 * processes (torch_runner.py --derive-serve, the derivation itself in torch_derive.py beside it)
 * each take one module after another over a socket, so that a directory costs the ~1.2 s of
 * starting Python with torch once per process, not once per file. Each module has its own time
 * bound: one that runs past it, or whose process dies, is named and its process replaced, and the
 * other modules go on. The modules are trusted as references are, and still run sandboxed. */
#include "verifier/plan/torchderive.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "kg_ufile.h"
#include "sandbox/sandbox.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/paths.h"

#define KG_DERIVE_SCRIPT "torch_derive.py"
#define MAX_WORKERS 4
#define START_S 120.0 /* importing torch on a loaded 2-core machine */
#define REPLY_MAX (4u << 20)
#define DIMS_MAX 1024

struct pool {
	pthread_mutex_t mu;
	struct kg_torch_job *jobs;
	size_t n, next, reported;
	const struct kg_torch_derive_opts *o;
	double file_s;
	char py[PATH_MAX], script[PATH_MAX], helper[PATH_MAX];
	int start_rc; /* a process that could not start: every module left gets start_msg */
	char start_msg[sizeof(((kg_error *)0)->msg)];
};

struct worker {
	struct pool *p;
	struct kg_sb_child *c;
	int sock;
	kg_buf rx;
	char prefix[PATH_MAX];
};

/* --dims as the derivation takes it: NAME=INT pairs, comma-separated, nothing else (it travels
 * as one word of a job's line). */
int kg_torch_check_dims(const char *dims, kg_error *e)
{
	if (strlen(dims) > DIMS_MAX)
		return kg_err(e, -EINVAL, "--dims: longer than %d characters", DIMS_MAX);
	for (const char *p = dims; *p;) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		if (!eq || eq > end || eq == p)
			return kg_err(e, -EINVAL, "--dims: expected NAME=VALUE[,NAME=VALUE...], got '%s'", dims);
		for (const char *c = p; c < eq; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
				return kg_err(e, -EINVAL, "--dims: '%.*s' is not a Python name", (int)(eq - p), p);
		if (eq + 1 == end)
			return kg_err(e, -EINVAL, "--dims: no value for '%.*s'", (int)(eq - p), p);
		for (const char *c = eq + 1; c < end; c++)
			if (*c < '0' || *c > '9' || end - eq > 12)
				return kg_err(e, -EINVAL, "--dims: '%.*s' is not a positive integer", (int)(end - eq - 1),
					      eq + 1);
		p = *end ? end + 1 : end;
	}
	return 0;
}

static void job_fail(struct kg_torch_job *j, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void job_fail(struct kg_torch_job *j, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
	va_end(ap);
	j->rc = rc;
}

/* How a process ended, for a message, with the tail of what it printed for the module named
 * (after torch_derive.py's mark for it; nothing where the output kept does not reach it), or of
 * all it printed (name NULL). */
static void ended_text(const struct kg_sb_outcome *o, const char *name, char *out, size_t outsz)
{
	char mark[128];
	snprintf(mark, sizeof(mark), "--- kgate derive %s ---\n", name ? name : "");
	const char *txt = name || !o->output ? "" : o->output; /* a process that did not start: all it said */
	for (const char *at = o->output && name ? strstr(o->output, mark) : NULL; at; at = strstr(at + 1, mark))
		txt = at + strlen(mark);
	size_t n = strlen(txt);
	while (n && (txt[n - 1] == '\n' || txt[n - 1] == ' '))
		n--;
	const char *from = n > 280 ? txt + n - 280 : txt;
	snprintf(out, outsz, "%s %s%s%d%s%.*s", kg_sb_end_name(o->end), o->syscall[0] ? o->syscall : "",
		 o->syscall[0] ? ", " : "", o->end == KG_SB_END_SIGNAL ? o->signo : o->exit_code, n ? ": " : "",
		 (int)(txt + n - from), from);
}

/* Ends the worker's process (kill when kill_now, else after it saw EOF and had time to exit) and
 * returns how it ended in o (its output owned by the caller's copy in text). */
static void stop(struct worker *w, int kill_now, enum kg_sb_end why, const char *name, char *text, size_t textsz)
{
	if (!w->c)
		return;
	if (w->sock >= 0)
		shutdown(w->sock, SHUT_WR);
	if (kill_now || kg_sb_wait_fd(w->c, -1, 5000) != KG_SB_ENDED)
		kg_sb_kill(w->c, kill_now ? why : KG_SB_END_KILLED);
	struct kg_sb_outcome o = {0};
	kg_sb_wait(w->c, &o);
	if (text)
		ended_text(&o, name, text, textsz);
	kg_sb_free(w->c);
	w->c = NULL;
	if (w->sock >= 0)
		close(w->sock);
	w->sock = -1;
	w->rx.len = 0;
}

/* Waits until rx holds a line and, when want_body, the LEN bytes after "WORD LEN\n"; 0 then (the
 * line's length in *line_len, the body's in *body_len), -ETIMEDOUT past deadline_ns, -EPIPE when the
 * process ended or closed its end first. */
static int await(struct worker *w, uint64_t deadline_ns, int want_body, size_t max, size_t *line_len,
		 size_t *body_len)
{
	for (;;) {
		char *nl = w->rx.len ? memchr(w->rx.data, '\n', w->rx.len) : NULL;
		if (nl) {
			*line_len = (size_t)(nl - w->rx.data);
			if (!want_body)
				return 0;
			const char *sp = memchr(w->rx.data, ' ', *line_len);
			unsigned long len = sp ? strtoul(sp + 1, NULL, 10) : 0;
			if (!sp || len > max)
				return -EPROTO;
			*body_len = len;
			if (w->rx.len >= *line_len + 1 + len)
				return 0;
		}
		uint64_t now = kg_now_ns();
		if (now >= deadline_ns)
			return -ETIMEDOUT;
		int r = kg_sb_wait_fd(w->c, w->sock, (int)((deadline_ns - now + 999999) / 1000000));
		if (r == KG_SB_ENDED)
			return -EPIPE;
		if (r != 1)
			continue;
		char buf[65536];
		ssize_t k = recv(w->sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0)
			return -EPIPE;
		if (w->rx.len + (size_t)k > max + 64 || kg_buf_append(&w->rx, buf, (size_t)k))
			return -EPROTO;
	}
}

/* Drops the first n bytes of rx. */
static void consume(kg_buf *b, size_t n)
{
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

static int start(struct worker *w, kg_error *e)
{
	struct pool *p = w->p;
	const struct kg_backend *be = kg_backend_get(KG_BACKEND_TORCH);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	/* a process that stops reading is not waited on for ever */
	struct timeval tv = {.tv_sec = 30};
	setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* unbuffered: the words of a module whose process dies are not lost in a buffer */
	const char *argv[] = {p->py, "-I", "-B", "-u", p->script, "--derive-serve", NULL};
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp", "USER=kgate",
					   "OMP_NUM_THREADS=1", NULL};
	struct kg_sb_path paths[4];
	int n_paths = 0;
	if (strncmp(p->helper, "/usr/", 5))
		paths[n_paths++] = (struct kg_sb_path){.host = p->helper};
	kg_python_sandbox_paths(p->py, p->script, w->prefix, sizeof(w->prefix), paths, &n_paths);
	/* the watchdog is a backstop over the whole batch; each module's bound is kept here */
	double left = START_S + p->file_s * (double)p->n;
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_RUN,
		.name = "derive-torch",
		.argv = argv,
		.envp = envp,
		.fds = &sv[1],
		.n_fds = 1,
		.paths = paths,
		.n_paths = n_paths,
		.limits = {.wall_s = left < 86400 ? left : 86400, .mem_bytes = 8ull << 30, .output_keep = 64 * 1024,
			   .address_space_unbounded = be->address_space_unbounded, .data_bounded = be->data_bounded},
		.allow_threads = 1,
		.stdin_fd = -1,
		.proc = be->proc,
		.sys_ro = be->sys_ro,
		.syscalls = be->syscalls,
		/* a trusted process that writes nothing: a library's own read-write open (a GPU host's
		 * torch opening a device node or a cache) fails with EACCES rather than ending it */
		.readonly_opens = be->readonly_opens ? KG_SB_RO_OPENS_EACCES : 0,
	};
	int rc = kg_sb_spawn(&spec, &w->c, e);
	close(sv[1]);
	if (rc) {
		close(sv[0]);
		w->c = NULL;
		return rc;
	}
	w->sock = sv[0];
	size_t line = 0, body = 0;
	rc = await(w, kg_now_ns() + (uint64_t)(START_S * 1e9), 0, REPLY_MAX, &line, &body);
	if (!rc && line >= 6 && !memcmp(w->rx.data, "ready ", 6)) {
		consume(&w->rx, line + 1);
		return 0;
	}
	char text[400];
	stop(w, rc == -ETIMEDOUT, KG_SB_END_TIMEOUT, NULL, text, sizeof(text));
	return kg_err(e, -ENOENT, "the sandboxed torch process did not start (%s)",
		      rc == -ETIMEDOUT ? "no word from it in 120 s" : text);
}

/* One module through the worker's process (started first where there is none). */
static void run_job(struct worker *w, struct kg_torch_job *j)
{
	struct pool *p = w->p;
	struct kg_ufile src = {0};
	kg_error e = {0};
	/* what runs is what was read: no link, a regular file, capped */
	if (kg_ufile_read(j->module, "module", KG_SOURCE_MAX, &src, &e)) {
		job_fail(j, e.code ? e.code : -EINVAL, "%s", e.msg);
		return;
	}
	pthread_mutex_lock(&p->mu);
	int start_rc = p->start_rc;
	pthread_mutex_unlock(&p->mu);
	if (start_rc) {
		job_fail(j, start_rc, "%s", p->start_msg);
	} else if (!w->c && (start_rc = start(w, &e))) {
		job_fail(j, start_rc, "%s", e.msg);
		pthread_mutex_lock(&p->mu);
		if (!p->start_rc) {
			p->start_rc = start_rc;
			snprintf(p->start_msg, sizeof(p->start_msg), "%s", e.msg);
		}
		pthread_mutex_unlock(&p->mu);
	}
	if (!w->c) {
		kg_ufile_free(&src);
		return;
	}
	uint64_t t0 = kg_now_ns(); /* the bound is the module's: a process's start has its own */
	/* the job's line, then (a state job's) its spec and "source", then the module */
	kg_buf pre = {0};
	char head[DIMS_MAX + 200];
	size_t spec_len = j->verb && j->spec ? strlen(j->spec) : 0;
	int hl = j->verb ? snprintf(head, sizeof(head), "%s %s - %zu\n", j->verb, j->name, spec_len + 8 + src.len)
			 : snprintf(head, sizeof(head), "job %s %s %zu\n", j->name,
				    p->o->dims && *p->o->dims ? p->o->dims : "-", src.len);
	int rc = kg_buf_append(&pre, head, (size_t)hl);
	if (!rc && j->verb && !(rc = kg_buf_append(&pre, j->spec ? j->spec : "", spec_len)))
		rc = kg_buf_append(&pre, "\nsource\n", 8);
	for (size_t off = 0; !rc && off < pre.len + src.len;) {
		const char *b = off < pre.len ? pre.data + off : src.data + (off - pre.len);
		size_t len = off < pre.len ? pre.len - off : src.len - (off - pre.len);
		ssize_t k = send(w->sock, b, len, MSG_NOSIGNAL);
		if (k > 0)
			off += (size_t)k;
		else if (k < 0 && errno != EINTR)
			rc = -EPIPE;
	}
	kg_buf_free(&pre);
	kg_ufile_free(&src);
	size_t line = 0, body = 0;
	if (!rc)
		rc = await(w, t0 + (uint64_t)(p->file_s * 1e9), 1, j->reply_max ? j->reply_max : REPLY_MAX, &line, &body);
	if (!rc && line > 3 && !memcmp(w->rx.data, "ok ", 3)) {
		j->rc = kg_buf_append(&j->yaml, w->rx.data + line + 1, body);
		consume(&w->rx, line + 1 + body);
	} else if (!rc && line > 5 && !memcmp(w->rx.data, "fail ", 5)) {
		job_fail(j, -EINVAL, "%s: %.*s", j->module, (int)(body < 900 ? body : 900), w->rx.data + line + 1);
		consume(&w->rx, line + 1 + body);
	} else {
		/* the process is gone or no longer to be trusted with the next module: replaced */
		char text[400];
		stop(w, rc == -ETIMEDOUT || !rc || rc == -EPROTO, KG_SB_END_TIMEOUT, j->name, text, sizeof(text));
		const char *what = j->verb ? "building the run's state" : "deriving the task";
		if (rc == -ETIMEDOUT)
			job_fail(j, -ETIMEDOUT, "%s: %s took over %g s (stopped; a module's time bound)", j->module, what,
				 p->file_s);
		else
			job_fail(j, -EINVAL, "%s: %s failed (%s)", j->module, what,
				 rc == -EPIPE ? text : "a malformed reply from the torch process");
	}
	j->seconds = (double)(kg_now_ns() - t0) / 1e9;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->p;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		size_t i = p->next < p->n ? p->next++ : p->n;
		pthread_mutex_unlock(&p->mu);
		if (i == p->n)
			break;
		run_job(w, &p->jobs[i]);
		/* the caller hears of each module in the order given, as soon as those before it are done */
		pthread_mutex_lock(&p->mu);
		p->jobs[i].done = 1;
		while (p->reported < p->n && p->jobs[p->reported].done) {
			if (p->o->done)
				p->o->done(&p->jobs[p->reported], p->reported, p->o->arg);
			p->reported++;
		}
		pthread_mutex_unlock(&p->mu);
	}
	stop(w, 0, KG_SB_END_KILLED, NULL, NULL, 0);
	return NULL;
}

int kg_torch_derive_jobs(struct kg_torch_job *jobs, size_t n, const struct kg_torch_derive_opts *o, kg_error *e)
{
	const struct kg_backend *be = kg_backend_get(KG_BACKEND_TORCH);
	struct pool p = {.jobs = jobs, .n = n, .o = o, .file_s = o->file_s > 0 ? o->file_s : 60};
	char why[160];
	int rc;
	if (o->dims && (rc = kg_torch_check_dims(o->dims, e)))
		return rc;
	if (kg_path_python(p.py, sizeof(p.py), why, sizeof(why)))
		return kg_err(e, -ENOENT, "%s", why);
	if (kg_path_runner_script(be->runner_script, p.script, sizeof(p.script)) ||
	    kg_path_runner_script(KG_DERIVE_SCRIPT, p.helper, sizeof(p.helper)))
		return kg_err(e, -ENOENT, "%s or %s not found beside kgate-run", be->runner_script, KG_DERIVE_SCRIPT);
	for (size_t i = 0; i < n; i++)
		jobs[i].rc = 0, jobs[i].done = 0, jobs[i].msg[0] = '\0';
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nw = o->workers > 0 ? (size_t)o->workers : (ncpu > 0 ? (size_t)ncpu : 1);
	if (nw > MAX_WORKERS)
		nw = MAX_WORKERS;
	if (nw > n)
		nw = n ? n : 1;
	pthread_mutex_init(&p.mu, NULL);
	struct worker ws[MAX_WORKERS];
	pthread_t th[MAX_WORKERS];
	int started[MAX_WORKERS] = {0};
	for (size_t i = 0; i < MAX_WORKERS; i++)
		ws[i] = (struct worker){.p = &p, .sock = -1};
	/* the first runs on this thread: a sandbox dies with the thread that started it, and each
	 * thread here reaps its own before it ends */
	for (size_t i = 1; i < nw; i++)
		if (!pthread_create(&th[i], NULL, worker_main, &ws[i]))
			started[i] = 1;
	worker_main(&ws[0]);
	for (size_t i = 1; i < nw; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	for (size_t i = 0; i < nw; i++)
		kg_buf_free(&ws[i].rx);
	pthread_mutex_destroy(&p.mu);
	return 0;
}
