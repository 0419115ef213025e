/* Inside the sandboxed program, after exec: kg_sb_seccomp_apply, the filter a program spawned with
 * seccomp_deferred loads on itself once its own start-up is done (kgate-run after CUDA's context,
 * the Python runners through libkgate-filter.so), from the description its spec put in the
 * environment, with the supervisor's listener passed back over the socket it was given. The
 * filter itself is seccomp.c's, as the spawner builds its own. Like everything in that process,
 * it holds only as far as the kernel holds it (a loaded filter cannot be removed). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sb_int.h"

static int env_int(const char *name, int dflt)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	long v = strtol(s, &end, 10);
	return *end || v < 0 || v > 4096 ? dflt : (int)v;
}

static int load(const struct sb_filter_params *fp, scmp_filter_ctx *ctx, kg_error *e)
{
	int rc = sb_filter_profile(fp, ctx, e);
	if (rc)
		return rc;
	if ((rc = seccomp_attr_set(*ctx, SCMP_FLTATR_CTL_TSYNC, 1)) || (rc = seccomp_load(*ctx))) {
		seccomp_release(*ctx);
		*ctx = NULL;
		return kg_err(e, rc, "seccomp: loading the %s filter: %s", kg_sb_profile_name(fp->desc->profile),
			      strerror(-rc));
	}
	return 0;
}

/* Inside a sandbox the spec's description decides; the caller's own idea counts only outside. */
static int filter_desc(const struct kg_sb_filter_opts *o, struct sb_filter_desc *d, kg_error *e)
{
	const char *env = getenv(KG_SB_ENV_FILTER);
	if (env) {
		if (sb_filter_desc_parse(env, d))
			return kg_err(e, -EINVAL, "seccomp: malformed %s: no filter loaded", KG_SB_ENV_FILTER);
		return 0;
	}
	memset(d, 0, sizeof(*d));
	if ((unsigned)o->profile > KG_SB_PROFILE_RUN)
		return kg_err(e, -EINVAL, "seccomp: unknown profile %d", (int)o->profile);
	d->profile = o->profile;
	d->allow_threads = !!o->allow_threads;
	d->mem_bytes = o->mem_bytes == KG_SB_MEM_UNBOUNDED ? 0 : o->mem_bytes;
	d->readonly_opens = o->readonly_opens == KG_SB_RO_OPENS_EACCES ? KG_SB_RO_OPENS_EACCES : !!o->readonly_opens;
	return sb_filter_desc_names(d, o->syscalls, e);
}

int kg_sb_seccomp_apply(const struct kg_sb_filter_opts *o, kg_error *e)
{
	int sock = env_int(KG_SB_ENV_NOTIFY_FD, -1);
	int nfds = env_int(KG_SB_ENV_NFDS, 0);
	struct stat st;
	if (sock >= 0 && (fstat(sock, &st) || !S_ISSOCK(st.st_mode)))
		sock = -1;
	struct sb_filter_desc d;
	int rc = filter_desc(o, &d, e);
	if (rc)
		goto out_sock;
	struct sb_filter_params fp = {
		.desc = &d,
		.ioctl_fds = o->ioctl_fds,
		.n_ioctl_fds = o->n_ioctl_fds,
		.msg_fds = o->msg_fds,
		.n_msg_fds = o->n_msg_fds,
		.fd_limit = 3 + nfds,
		.self_pid = getpid(),
		.notify = sock >= 0 && sb_notify_supported(),
	};
	if (sock >= fp.fd_limit)
		fp.fd_limit = sock + 1;
	scmp_filter_ctx ctx = NULL;
	if ((rc = load(&fp, &ctx, e)))
		goto out;
	if (fp.notify) {
		int lfd = seccomp_notify_fd(ctx);
		rc = lfd < 0 ? lfd : sb_send_fd(sock, lfd);
		if (lfd >= 0)
			close(lfd);
		if (rc) {
			/* Nobody will answer the notifications, which would then fail with ENOSYS and
			 * let the program go on: stack the same list with a killing default on top. */
			scmp_filter_ctx kill_ctx = NULL;
			fp.notify = 0;
			if (!load(&fp, &kill_ctx, e))
				seccomp_release(kill_ctx);
			kg_err(e, rc, "seccomp: passing the listener to the sandbox: %s (the filter kills instead)",
			       strerror(-rc));
		}
	}
out:
	if (ctx)
		seccomp_release(ctx);
out_sock:
	if (sock >= 0)
		close(sock);
	return rc;
}
