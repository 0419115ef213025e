/* Starting a runner: its sandbox from the backend's data (kgate-run, or an interpreted runner such
 * as the torch reference's), a device arena attached to kgate-device and exported in place of the
 * host arena, the control socket; then HELLO with the runner's pid from the kernel, its process
 * attached and stopped, the trusted clock's calibration before anything untrusted exists in it,
 * distrust of a watched runner, and LOAD. */
#include "verifier/session_int.h"

#include "device/keeper.h"
#include "verifier/resolve.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The run sandbox of a runner, kgate-run or a script, from the backend's data: what the two
 * differ in (when the filter applies, threads, sealed opens) the caller sets. */
static struct kg_sb_spec run_spec(const struct kg_session_opts *o, const struct kg_arena *a, const char *const *argv,
				  const char *const *envp, const int *fds, const struct kg_sb_path *paths, int n_paths)
{
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_RUN,
		.name = o->be->sandbox_name,
		.argv = argv,
		.envp = envp,
		.cwd = "/tmp",
		.fds = fds,
		.n_fds = a->fd_in < 0 ? 2 : a->fd_map < 0 ? 3 : 4,
		.paths = paths,
		.n_paths = n_paths,
		.limits = o->limits,
		.required = o->required_layers,
		.disabled = o->disabled_layers,
		.stdin_fd = -1,
		.devices = o->be->devices,
		.proc = o->be->proc,
		.sys_ro = o->be->sys_ro,
		.syscalls = o->be->syscalls,
		.readonly_opens = o->be->readonly_opens,
	};
	spec.limits.address_space_unbounded = o->be->address_space_unbounded;
	spec.limits.data_bounded = o->be->data_bounded;
	return spec;
}

static int hello_and_load(struct kg_session *s, const struct kg_session_opts *o, const char *load_path, kg_error *e);

/* An interpreted runner (torch_runner.py): the Python kg_path_python found runs the script from
 * beside kgate-run on the same fds, under the run profile plus the backend's calls, applied by the
 * sandbox before exec. What it loads is a module's source, shown read-only. */
static int start_script(struct kg_session *s, const struct kg_session_opts *o, kg_error *e)
{
	char py[PATH_MAX], why[160], script[PATH_MAX], prefix[PATH_MAX];
	if (kg_path_python(py, sizeof(py), why, sizeof(why)))
		return kg_err(e, -ENOENT, "%s", why);
	if (kg_path_runner_script(o->be->runner_script, script, sizeof(script)))
		return kg_err(e, -ENOENT, "%s not found beside kgate-run (install kgate, or set KGATE_RUNNER)",
			      o->be->runner_script);
	/* a candidate's runner is told so: it builds a ModelNew from the constructor's arguments in the
	 * state file instead of the problem's Model */
	const char *argv[] = {py, "-I", "-B", script, "--backend", o->be->name, o->cand_module ? "--candidate" : NULL, NULL};
	/* USER spares the interpreter a passwd lookup (a socket to nscd) */
	static const char *const envp[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp", "USER=kgate",
					   "OMP_NUM_THREADS=1", NULL};
	/* both: the run's state file; a reference: its module as problem.py; a candidate: its own module
	 * and the extensions its build made (mapped executable), and never the problem module */
	if (!o->state_file)
		return kg_err(e, -EINVAL, "a torch runner needs the run's state file");
	struct kg_sb_path paths[6] = {{.host = o->state_file, .inside = "/kgate/lib/state", .flags = 0}};
	int n_paths = 1;
	const char *load_path = "/kgate/lib/problem.py";
	if (!o->cand_module) {
		paths[n_paths++] = (struct kg_sb_path){.host = o->so_path, .inside = "/kgate/lib/problem.py"};
	} else {
		paths[n_paths++] = (struct kg_sb_path){.host = o->cand_module, .inside = "/kgate/cand/kernel.py"};
		paths[n_paths++] = (struct kg_sb_path){.host = o->so_path, .inside = "/kgate/cand/kernel.so",
						       .flags = KG_SB_PATH_EXEC};
		load_path = "/kgate/cand/kernel.py";
	}
	kg_python_sandbox_paths(py, script, prefix, sizeof(prefix), paths, &n_paths);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	int one = 1;
	setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	struct kg_arena *a = s->arena;
	int fds[4] = {sv[1], a->fd, a->fd_in, a->fd_map};
	struct kg_sb_spec spec = run_spec(o, a, argv, envp, fds, paths, n_paths);
	spec.allow_threads = 1; /* the interpreter's own threads; its filter applies before exec */
	/* importing torch takes seconds on a small machine: HELLO may come late */
	double keep = s->call_timeout_s;
	if (s->call_timeout_s < 120)
		s->call_timeout_s = 120;
	int rc = kg_sb_spawn(&spec, &s->sb, e);
	close(sv[1]);
	if (rc) {
		close(sv[0]);
		s->call_timeout_s = keep;
		return rc;
	}
	s->ctl = sv[0];
	rc = hello_and_load(s, o, load_path, e);
	s->call_timeout_s = keep;
	return rc;
}

int kg_session_start(struct kg_session *s, const struct kg_session_opts *o, struct kg_arena *a, kg_error *e)
{
	int sv[2] = {-1, -1};
	int rc;
	char runner[PATH_MAX];
	memset(s, 0, sizeof(*s));
	s->ctl = -1;
	s->arena = a;
	s->call_timeout_s = o->call_timeout_s > 0 ? o->call_timeout_s : 60;
	s->host = !o->be->needs_gpu;
	s->threads = o->threads;
	/* a run under a tool (compute-sanitizer) is never timed, and the tool talks to its library in
	 * the runner: that process is not stopped between commands */
	s->watched = o->watched && !o->tool_argv;
	if (!o->tool_argv && !(s->proc = calloc(1, sizeof(*s->proc))))
		return kg_err(e, -ENOMEM, "out of memory");
	if (s->proc)
		s->proc->pidfd = -1;
	/* a tool writes its report and tears down after the runner is gone: give it time */
	s->linger_ms = o->tool_argv ? 60000 : 2000;
	if (o->be->runner_script)
		return start_script(s, o, e);
	if (kg_path_runner(runner, sizeof(runner)))
		return kg_err(e, -ENOENT, "kgate-run not found (set KGATE_RUNNER or install kgate)");
	int n_tool = 0;
	while (o->tool_argv && o->tool_argv[n_tool])
		if (++n_tool > 30)
			return kg_err(e, -E2BIG, "too many tool arguments");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	/* HELLO comes with the runner's pid as the kernel knows it: the key to its CPU-time clock */
	int one = 1;
	setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));

	/* A device arena is the keeper's, exported to the runner in place of the host arena, which
	 * then stays kgate's and the keeper's alone. Under a tool the runner copies exact buffers. */
	int dev_fd = -1;
	size_t dev_bytes = 0;
	char dev_arg[32];
	if (o->be->needs_gpu && !o->tool_argv) {
		if (!o->keeper) {
			close(sv[0]);
			close(sv[1]);
			return kg_err(e, -EINVAL, "a device runner needs kgate-device (the keeper of its arena)");
		}
		if ((rc = kg_keeper_attach(o->keeper, a->fd, a->capacity, o->dev_sets, o->dev_stride, &s->dev_slot, &dev_fd, &dev_bytes, e))) {
			close(sv[0]);
			close(sv[1]);
			return rc;
		}
		s->keeper = o->keeper;
		snprintf(dev_arg, sizeof(dev_arg), "%zu", dev_bytes);
	}
	const char *argv[40];
	int ac = 0;
	for (int i = 0; o->tool_argv && o->tool_argv[i]; i++)
		argv[ac++] = o->tool_argv[i];
	argv[ac++] = runner;
	argv[ac++] = "--backend";
	argv[ac++] = o->be->name;
	if (o->tool_argv) {
		argv[ac++] = "--exact-buffers";
		argv[ac++] = "--tool-sockets";
	}
	if (dev_fd >= 0) {
		argv[ac++] = "--device-arena";
		argv[ac++] = dev_arg;
	}
	argv[ac] = NULL;
	/* A sanitizer build's runner: ASan's own fault handler would report through /proc/self/maps,
	 * which the seal ends (a fault named as an open); a fault must end the process as it does in
	 * a production build, from the wait status */
	static const char *const envp_plain[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp",
						 "OMP_NUM_THREADS=1", NULL};
	static const char *const envp_san[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp",
					       "OMP_NUM_THREADS=1", "ASAN_OPTIONS=handle_segv=0:handle_sigbus=0:handle_sigfpe=0",
					       NULL};
	const char *const *base = getenv("KGATE_SANITIZE") ? envp_san : envp_plain;
	/* a device runner sees the GPUs kgate was given (one worker per GPU), as its keeper does */
	const char *envp[12];
	char cvd[160];
	int ne = 0;
	while (ne < 10 && base[ne]) {
		envp[ne] = base[ne];
		ne++;
	}
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	if (o->be->needs_gpu && vis && strlen(vis) < 120) {
		snprintf(cvd, sizeof(cvd), "CUDA_VISIBLE_DEVICES=%s", vis);
		envp[ne++] = cvd;
	}
	envp[ne] = NULL;
	/* fd 5: a paged arena's inputs, a memfd sealed so that the runner can only map it read-only;
	 * fd 6: its page map (runner/wire.h) */
	int fds[4] = {sv[1], dev_fd >= 0 ? dev_fd : a->fd, dev_fd >= 0 ? -1 : a->fd_in, dev_fd >= 0 ? -1 : a->fd_map};
	/* An installed runner lives under /usr, which every profile already shows read-only; a build
	 * tree's runner has to be bound in (at the same path, so argv[0] stays valid). */
	int n_paths = 1;
	struct kg_sb_path paths[3] = {
		{.host = o->so_path, .inside = "/kgate/lib/kernel.so", .flags = KG_SB_PATH_EXEC},
	};
	if (strncmp(runner, "/usr/", 5))
		paths[n_paths++] = (struct kg_sb_path){.host = runner, .inside = NULL, .flags = KG_SB_PATH_EXEC};
	/* A tool outside /usr (CUDA under /opt, say) is shown with its whole directory: it loads its
	 * injection libraries from beside itself. */
	char tool_dir[PATH_MAX];
	if (o->tool_argv && strncmp(o->tool_argv[0], "/usr/", 5)) {
		snprintf(tool_dir, sizeof(tool_dir), "%s", o->tool_argv[0]);
		char *slash = strrchr(tool_dir, '/');
		if (slash && slash != tool_dir)
			*slash = '\0';
		paths[n_paths++] = (struct kg_sb_path){.host = tool_dir, .inside = NULL, .flags = KG_SB_PATH_EXEC};
	}
	struct kg_sb_spec spec = run_spec(o, a, argv, envp, fds, paths, n_paths);
	spec.seccomp_deferred = 1; /* kgate-run applies it itself, after sealing, before LOAD */
	spec.allow_threads = o->threads;
	spec.sealed_opens = o->be->sealed_opens;
	/* the candidate: its filters and its changes to sealed mappings are the supervisor's */
	spec.watched = s->watched;
	rc = kg_sb_spawn(&spec, &s->sb, e);
	close(sv[1]);
	sv[1] = -1;
	if (dev_fd >= 0)
		close(dev_fd);
	if (rc) {
		close(sv[0]);
		return rc;
	}
	s->ctl = sv[0];
	return hello_and_load(s, o, "/kgate/lib/kernel.so", e);
}

/* HELLO (with the runner's pid from the kernel), the clock's calibration, then LOAD of what the
 * sandbox shows at load_path. A watched runner is distrusted before LOAD, and its loader thread
 * must be gone once LOAD is answered. */
static int hello_and_load(struct kg_session *s, const struct kg_session_opts *o, const char *load_path, kg_error *e)
{
	struct kg_wire_reply r;
	int rc = kg_sess_recv_reply(s, KG_OP_HELLO, 0, &r, s->call_timeout_s, &s->runner_pid);
	if (rc == KG_SESSION_FAULT) {
		/* nothing untrusted runs before HELLO: a runner that cannot say it is broken */
		snprintf(s->msg, sizeof(s->msg), "%s", s->fault);
		s->fault_code = 0;
		return KG_SESSION_FAILED;
	}
	if (rc)
		return rc;
	int zero = 0;
	setsockopt(s->ctl, SOL_SOCKET, SO_PASSCRED, &zero, sizeof(zero));
	/* a device's ceiling is the keeper's measure, where nothing untrusted runs */
	s->ceiling_mbps = s->keeper ? s->keeper->ceiling_mbps : r.info;
	s->has_cpu_clock = s->runner_pid > 0 && !clock_getcpuclockid(s->runner_pid, &s->cpu_clock);
	if (s->proc) {
		if (s->runner_pid <= 0 || kg_sb_proc_attach(s->proc, s->runner_pid, e)) {
			/* no pid to stop: the process would run between commands; nothing is verified so */
			snprintf(s->msg, sizeof(s->msg), "the runner's process cannot be watched: %s",
				 s->runner_pid <= 0 ? "its pid did not come with HELLO" : e->msg);
			return KG_SESSION_FAILED;
		}
		if (!kg_sb_proc_tasks(s->proc, e) && r.tid)
			s->loader = kg_sb_proc_outer_tid(s->proc, (pid_t)r.tid);
		if (s->watched && r.tid && !s->loader) {
			/* the one thread that must be gone after LOAD could not be told from the others */
			snprintf(s->msg, sizeof(s->msg), "the runner's loader thread (tid %u inside) is not among its threads",
				 r.tid);
			return KG_SESSION_FAILED;
		}
		if ((rc = kg_sess_hold(s, KG_OP_HELLO)))
			return rc;
	}
	/* nobody times a run under a tool */
	if (!o->tool_argv && (rc = kg_sess_calibrate(s, e)))
		return rc;

	struct kg_wire_cmd load;
	memset(&load, 0, sizeof(load));
	load.magic = KG_WIRE_MAGIC;
	load.op = KG_OP_LOAD;
	snprintf(load.path, sizeof(load.path), "%s", load_path);
	if (s->watched && (rc = kg_sb_distrust(s->sb, s->runner_pid, e)))
		return rc;
	if ((rc = kg_sess_resume(s)))
		return rc;
	uint64_t t0;
	rc = kg_sess_exchange(s, &load, 0, &r, &t0, e);
	s->loaded = 1;
	if (rc == KG_SESSION_OK || rc == KG_SESSION_FAILED) {
		int h = kg_sess_hold(s, KG_OP_LOAD);
		if (h)
			return h;
	}
	if (rc)
		return rc;
	s->sealed = r.info == 1;
	return KG_SESSION_OK;
}

