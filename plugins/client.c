/* kgate's handle on an agent: the same three calls whether the plugin runs in this process
 * (inproc: dlopen, fast, a crash is ours) or in a helper process (the default: a crash or a hang
 * of the plugin becomes an error for that round, and the next call starts a fresh helper). */
#include "plugins/plugin.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/kgate.pb-c.h"

/* Loading a plugin and creating an agent do no network work; this bounds them all the same. */
#define SETUP_TIMEOUT_MS 30000

struct kg_agent {
	enum kg_agent_isolation iso;
	char path[4096];
	char host_exe[4096];
	char name[64];
	int timeout_s;
	uint8_t *config;
	size_t config_len;
	/* inproc */
	struct kg_plugin plugin;
	void *inst;
	/* process */
	pid_t pid;
	int fd;
};

const char *kg_agent_name(const struct kg_agent *a)
{
	return a->name;
}

static int copy_out(const uint8_t *p, size_t n, uint8_t **out, size_t *len)
{
	*out = malloc(n ? n : 1);
	if (!*out)
		return -ENOMEM;
	if (n)
		memcpy(*out, p, n);
	*len = n;
	return 0;
}

/* ---- inproc ---- */

static int inproc_open(struct kg_agent *a, kg_error *e)
{
	int rc = kg_plugin_load(a->path, &a->plugin, e);
	if (rc)
		return rc;
	const struct kg_agent_plugin *api = a->plugin.api;
	snprintf(a->name, sizeof(a->name), "%s", api->name);
	char *err = NULL;
	rc = api->create(a->config, a->config_len, &a->inst, &err);
	if (rc >= 0 && !a->inst)
		rc = -EPROTO;
	if (rc < 0)
		kg_err(e, rc, "agent '%s': %s", a->name, err ? err : "create failed");
	if (err)
		api->free_buf(err);
	return rc < 0 ? rc : 0;
}

static int inproc_propose(struct kg_agent *a, const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
			  kg_error *e)
{
	const struct kg_agent_plugin *api = a->plugin.api;
	uint8_t *r = NULL;
	size_t n = 0;
	char *err = NULL;
	int rc = api->propose(a->inst, req, req_len, &r, &n, &err);
	if (rc >= 0 && !r)
		rc = -EPROTO;
	if (rc < 0)
		kg_err(e, rc, "agent '%s': %s", a->name, err ? err : "propose failed");
	else if ((rc = copy_out(r, n, resp, resp_len)))
		kg_err(e, rc, "agent '%s': out of memory", a->name);
	if (r)
		api->free_buf(r);
	if (err)
		api->free_buf(err);
	return rc < 0 ? rc : 0;
}

/* ---- process ---- */

/* Describes how the helper ended, reaping it. Kills it first when kill_first. */
static void reap(struct kg_agent *a, int kill_first, char *why, size_t whysz)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	if (a->pid <= 0) {
		snprintf(why, whysz, "not running");
		return;
	}
	if (kill_first)
		kill(-a->pid, SIGKILL); /* its process group: whatever the plugin started, too */
	int st = 0;
	pid_t r;
	while ((r = waitpid(a->pid, &st, 0)) < 0 && errno == EINTR)
		;
	if (r < 0)
		snprintf(why, whysz, "lost (%s)", strerror(errno));
	else if (WIFSIGNALED(st))
		snprintf(why, whysz, "killed by SIG%s", sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
	else
		snprintf(why, whysz, "exited with status %d", WEXITSTATUS(st));
	a->pid = -1;
}

/* Sends one call and reads the reply; on any failure the helper is reaped and described. */
static int host_call(struct kg_agent *a, Kgate__V1__HostCall__Kind kind, const uint8_t *payload, size_t len,
		     int timeout_ms, Kgate__V1__HostReply **reply, kg_error *e)
{
	Kgate__V1__HostCall c = KGATE__V1__HOST_CALL__INIT;
	c.kind = kind;
	c.payload.data = (uint8_t *)payload;
	c.payload.len = len;
	size_t n = kgate__v1__host_call__get_packed_size(&c);
	uint8_t *buf = malloc(n ? n : 1), *in = NULL;
	size_t in_len = 0;
	char why[128];
	if (!buf)
		return kg_err(e, -ENOMEM, "agent '%s': out of memory", a->name);
	kgate__v1__host_call__pack(&c, buf);
	int rc = kg_frame_write(a->fd, buf, n, e);
	free(buf);
	if (!rc)
		rc = kg_frame_read(a->fd, KG_AGENT_MAX_FRAME, timeout_ms, &in, &in_len, e);
	if (rc == -ETIMEDOUT) {
		reap(a, 1, why, sizeof(why));
		return kg_err(e, rc, "agent '%s' did not answer within %d s; its helper process was killed", a->name,
			      timeout_ms / 1000);
	}
	if (rc) {
		char detail[sizeof(e->msg)];
		snprintf(detail, sizeof(detail), "%s", e ? e->msg : "");
		reap(a, 1, why, sizeof(why));
		return kg_err(e, -ECHILD, "agent '%s': its helper process %s (%s)", a->name, why, detail);
	}
	*reply = kgate__v1__host_reply__unpack(NULL, in_len, in);
	free(in);
	if (!*reply) {
		reap(a, 1, why, sizeof(why));
		return kg_err(e, -EPROTO, "agent '%s': malformed reply from the helper process", a->name);
	}
	return 0;
}

static int spawn_host(struct kg_agent *a, kg_error *e)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int rc = -errno;
		close(sv[0]);
		close(sv[1]);
		return kg_err(e, rc, "fork: %s", strerror(-rc));
	}
	if (pid == 0) {
		/* Child: its own process group (so a timeout kills all of it), dies with kgate, the
		 * channel on fd 3, stdout folded into stderr so plugin chatter cannot corrupt frames. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (sv[1] == KG_AGENT_HOST_FD)
			fcntl(sv[1], F_SETFD, 0);
		else if (dup2(sv[1], KG_AGENT_HOST_FD) < 0)
			_exit(127);
		dup2(2, 1);
		char *argv[] = {a->host_exe, "agent-host", a->path, NULL};
		execv(a->host_exe, argv);
		fprintf(stderr, "kgate: cannot run the agent helper %s: %s\n", a->host_exe, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	a->fd = sv[0];
	a->pid = pid;

	/* The hello frame: did the plugin load? */
	uint8_t *in = NULL;
	size_t len = 0;
	char why[128];
	int rc = kg_frame_read(a->fd, KG_AGENT_MAX_FRAME, SETUP_TIMEOUT_MS, &in, &len, e);
	if (rc) {
		reap(a, 1, why, sizeof(why));
		return kg_err(e, -ECHILD, "agent helper for %s %s before it reported whether the plugin loaded", a->path,
			      why);
	}
	Kgate__V1__HostReply *r = kgate__v1__host_reply__unpack(NULL, len, in);
	free(in);
	if (!r) {
		reap(a, 1, why, sizeof(why));
		return kg_err(e, -EPROTO, "agent helper for %s: malformed hello", a->path);
	}
	if (r->status) {
		rc = kg_err(e, r->status, "%s", r->error);
		reap(a, 1, why, sizeof(why));
		goto out;
	}
	snprintf(a->name, sizeof(a->name), "%s", r->plugin_name);
	kgate__v1__host_reply__free_unpacked(r, NULL);
	r = NULL;
	if ((rc = host_call(a, KGATE__V1__HOST_CALL__KIND__KIND_CREATE, a->config, a->config_len, SETUP_TIMEOUT_MS, &r,
			    e)))
		return rc;
	if (r->status) {
		rc = kg_err(e, r->status, "agent '%s': %s", a->name, r->error[0] ? r->error : "create failed");
		reap(a, 1, why, sizeof(why));
	}
out:
	kgate__v1__host_reply__free_unpacked(r, NULL);
	return rc;
}

static int process_propose(struct kg_agent *a, const uint8_t *req, size_t req_len, uint8_t **resp,
			   size_t *resp_len, kg_error *e)
{
	int rc;
	if (a->pid <= 0 && (rc = spawn_host(a, e)))
		return rc;
	Kgate__V1__HostReply *r = NULL;
	if ((rc = host_call(a, KGATE__V1__HOST_CALL__KIND__KIND_PROPOSE, req, req_len,
			    a->timeout_s > 0 ? a->timeout_s * 1000 : -1, &r, e)))
		return rc;
	if (r->status)
		rc = kg_err(e, r->status, "agent '%s': %s", a->name, r->error[0] ? r->error : "propose failed");
	else if ((rc = copy_out(r->payload.data, r->payload.len, resp, resp_len)))
		kg_err(e, rc, "agent '%s': out of memory", a->name);
	kgate__v1__host_reply__free_unpacked(r, NULL);
	return rc;
}

/* ---- public ---- */

int kg_agent_open(const struct kg_agent_opts *o, struct kg_agent **out, kg_error *e)
{
	*out = NULL;
	struct kg_agent *a = calloc(1, sizeof(*a));
	if (!a)
		return kg_err(e, -ENOMEM, "out of memory");
	a->fd = -1;
	a->pid = -1;
	a->iso = o->isolation;
	a->timeout_s = o->timeout_s;
	int rc = kg_plugin_resolve(o->plugin, a->path, sizeof(a->path), e);
	if (rc)
		goto fail;
	/* The helper resolves nothing itself: it gets an absolute path. */
	char *real = realpath(a->path, NULL);
	if (real) {
		snprintf(a->path, sizeof(a->path), "%s", real);
		free(real);
	}
	snprintf(a->host_exe, sizeof(a->host_exe), "%s", o->host_exe ? o->host_exe : "/proc/self/exe");
	snprintf(a->name, sizeof(a->name), "%s", o->plugin);
	if ((rc = copy_out(o->config, o->config_len, &a->config, &a->config_len))) {
		kg_err(e, rc, "out of memory");
		goto fail;
	}
	rc = a->iso == KG_AGENT_INPROC ? inproc_open(a, e) : spawn_host(a, e);
	if (rc)
		goto fail;
	*out = a;
	return 0;
fail:
	kg_agent_close(a);
	return rc;
}

int kg_agent_propose(struct kg_agent *a, const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
		     kg_error *e)
{
	*resp = NULL;
	*resp_len = 0;
	if (req_len > KG_AGENT_MAX_FRAME - 64)
		return kg_err(e, -EMSGSIZE, "propose request of %zu bytes is too large", req_len);
	return a->iso == KG_AGENT_INPROC ? inproc_propose(a, req, req_len, resp, resp_len, e)
					 : process_propose(a, req, req_len, resp, resp_len, e);
}

void kg_agent_close(struct kg_agent *a)
{
	if (!a)
		return;
	if (a->iso == KG_AGENT_INPROC) {
		if (a->inst)
			a->plugin.api->destroy(a->inst);
		kg_plugin_unload(&a->plugin);
	} else if (a->pid > 0) {
		/* Closing the channel asks the helper to destroy the agent and exit; a helper that does
		 * not within a moment is killed. */
		close(a->fd);
		a->fd = -1;
		int st;
		for (int i = 0; i < 200 && waitpid(a->pid, &st, WNOHANG) == 0; i++)
			usleep(10000);
		char why[128];
		if (waitpid(a->pid, &st, WNOHANG) == 0)
			reap(a, 1, why, sizeof(why));
		a->pid = -1;
	}
	free(a->config);
	free(a);
}
