/* Starting a runner: its sandbox from the backend's data (kgate-run, or an interpreted runner such
 * as the torch reference's), a device arena attached to kgate-device and exported in place of the
 * host arena, the control socket; then HELLO with the runner's pid from the kernel, its process
 * attached and stopped, the trusted clock's calibration before anything untrusted exists in it,
 * distrust of a watched runner, and LOAD. */
#include "verifier/session/session_int.h"

#include "verifier/session/keeper.h"
#include "verifier/plan/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* The run sandbox of a runner, kgate-run or a script, from the backend's data: what the two
 * differ in (when the filter applies, threads, sealed opens) the caller sets. */
static struct kg_sb_spec run_spec(const struct kg_session_opts *o, const char *const *argv, const char *const *envp,
				  const int *fds, int n_fds, const struct kg_sb_path *paths, int n_paths)
{
	struct kg_sb_spec spec = {
		.profile = KG_SB_PROFILE_RUN,
		.name = o->be->sandbox_name,
		.argv = argv,
		.envp = envp,
		.cwd = "/tmp",
		.fds = fds,
		.n_fds = n_fds,
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

/* The fds a runner gets from 3 on: the control socket, the arena (dev_fd: the device's in place of
 * the host arena), a paged arena's inputs and page map or a device runner's gate page (gate_fd, fd
 * 5: KG_WIRE_GATE_FD), then the tensor tables (runner/wire.h), whose number goes into tables_arg
 * for its command line. The count, or -1 without tables. */
static int runner_fds(const struct kg_arena *a, int ctl, int dev_fd, int gate_fd, int fds[5], char tables_arg[16])
{
	int n = 0;
	fds[n++] = ctl;
	fds[n++] = dev_fd >= 0 ? dev_fd : a->fd;
	if (dev_fd >= 0 && gate_fd >= 0)
		fds[n++] = gate_fd;
	if (dev_fd < 0 && a->fd_in >= 0 && a->fd_map >= 0) {
		fds[n++] = a->fd_in;
		fds[n++] = a->fd_map;
	}
	if (a->fd_tables < 0)
		return -1;
	snprintf(tables_arg, 16, "%d", 3 + n);
	fds[n++] = a->fd_tables;
	return n;
}

/* The environment of a Python runner: a device runner's also sees the GPUs kgate was given and the
 * run's JIT cache (Triton's and inductor's directories under /kgate/jit, compiled there ahead of the
 * timed calls, one compiler thread in-process), into env (room for 16). */
static void script_env(const struct kg_session_opts *o, const char **env, char *cvd, size_t cvdsz)
{
	static const char *const base[] = {"PATH=/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp", "USER=kgate",
					   "OMP_NUM_THREADS=1", NULL};
	static const char *const jit[] = {"TRITON_CACHE_DIR=/kgate/jit/triton", "TRITON_CACHE_AUTOTUNING=1",
					  "TORCHINDUCTOR_CACHE_DIR=/kgate/jit/inductor", "TORCHINDUCTOR_COMPILE_THREADS=1",
					  "PYTHONUNBUFFERED=1", NULL};
	int n = 0;
	for (int i = 0; base[i]; i++)
		env[n++] = base[i];
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	if (o->be->needs_gpu && vis && strlen(vis) < 120) {
		snprintf(cvd, cvdsz, "CUDA_VISIBLE_DEVICES=%s", vis);
		env[n++] = cvd;
	}
	for (int i = 0; o->jit_dir && jit[i]; i++)
		env[n++] = jit[i];
	env[n] = NULL;
}

/* A device runner's arena: kgate-device's, attached for this session and exported (dev_fd, the
 * caller's to close); "--device-arena BYTES" for its argv in dev_arg. 0, or an error. */
static int script_device(struct kg_session *s, const struct kg_session_opts *o, struct kg_arena *a, int *dev_fd,
			 char *dev_arg, size_t argsz, kg_error *e)
{
	size_t dev_bytes = 0;
	if (!o->keeper)
		return kg_err(e, -EINVAL, "a device runner needs kgate-device (the keeper of its arena)");
	int rc = o->take_slot ? kg_keeper_export(o->keeper, o->take_slot - 1, dev_fd, &dev_bytes, e)
			      : kg_keeper_attach(o->keeper, a->fd, a->capacity, o->dev_sets, o->dev_stride, &s->dev_slot,
						 dev_fd, &dev_bytes, e);
	if (!rc && o->take_slot)
		s->dev_slot = o->take_slot - 1;
	if (rc)
		return rc;
	s->keeper = o->keeper;
	snprintf(dev_arg, argsz, "%zu", dev_bytes);
	return 0;
}

/* An interpreted runner (torch_runner.py): the Python kg_path_python found runs the script from
 * beside kgate-run on the same fds, under the run profile plus the backend's calls, applied by the
 * sandbox before exec (on a device: by the runner itself once CUDA is up, through kgate's filter
 * library, and checked from outside before LOAD). What it loads is a module's source, shown
 * read-only; on a device its arena is kgate-device's, imported. */
static int start_script(struct kg_session *s, const struct kg_session_opts *o, kg_error *e)
{
	char py[PATH_MAX], why[160], script[PATH_MAX], prefix[PATH_MAX], flib[PATH_MAX], dev_arg[32], cvd[160];
	if (kg_path_python(py, sizeof(py), why, sizeof(why)))
		return kg_err(e, -ENOENT, "%s", why);
	if (kg_path_runner_script(o->be->runner_script, script, sizeof(script)))
		return kg_err(e, -ENOENT, "%s not found beside kgate-run (install kgate, or set KGATE_RUNNER)",
			      o->be->runner_script);
	/* both: the run's state file (a candidate's runner builds its ModelNew from the constructor's
	 * arguments there; a reference's binds the Model's kept buffers from it) */
	if (!o->state_file)
		return kg_err(e, -EINVAL, "a torch runner needs the run's state file");
	int device = o->be->needs_gpu && !o->tool_argv, filtered = device && o->be->script_filters_itself && !o->unfiltered;
	if (filtered && kg_path_runner_script("libkgate-filter.so", flib, sizeof(flib)))
		return kg_err(e, -ENOENT, "libkgate-filter.so not found beside kgate-run (the run filter of a Python "
					  "runner on a device)");
	int fds[5];
	char tables[16];
	struct kg_arena *a = s->arena;
	int sv[2], dev_fd = -1, rc;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return kg_err(e, -errno, "socketpair: %s", strerror(errno));
	if (device) {
		if ((rc = script_device(s, o, a, &dev_fd, dev_arg, sizeof(dev_arg), e))) {
			close(sv[0]);
			close(sv[1]);
			return rc;
		}
		/* a Python runner marks no gate on the device (kgate-run's CUDA backend does): its calls
		 * are timed by the keeper's span as an ungated runner's are */
		snprintf(s->gate_off, sizeof(s->gate_off), "a Python runner's calls are not gated");
	}
	int n_fds = runner_fds(a, sv[1], dev_fd, -1, fds, tables);
	if (n_fds < 0) {
		close(sv[0]);
		close(sv[1]);
		if (dev_fd >= 0)
			close(dev_fd);
		return kg_err(e, -EINVAL, "the arena has no tensor tables for the runner");
	}
	/* a candidate's runner is told so: it builds a ModelNew from the constructor's arguments in the
	 * state file instead of the problem's Model */
	const char *argv[16] = {py, "-I", "-B", script, "--backend", o->be->name, "--tables", tables};
	int ac = 8;
	if (o->cand_module)
		argv[ac++] = "--candidate";
	const char *envp[20];
	script_env(o, envp, cvd, sizeof(cvd));
	/* both: the state file; a reference: its module as problem.py; a candidate: its own module and
	 * the extensions its build made (mapped executable), and never the problem module */
	struct kg_sb_path paths[12] = {{.host = o->state_file, .inside = "/kgate/lib/state", .flags = 0}};
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
	if (filtered) {
		paths[n_paths++] = (struct kg_sb_path){.host = flib, .inside = NULL, .flags = KG_SB_PATH_EXEC};
		argv[ac++] = "--filter-lib";
		argv[ac++] = flib;
	}
	if (device) {
		argv[ac++] = "--device-arena";
		argv[ac++] = dev_arg;
	}
	argv[ac] = NULL;
	/* torch_runner.py loads its device half from beside itself */
	char helper[PATH_MAX];
	if (device && !kg_path_runner_script("torch_device.py", helper, sizeof(helper)))
		paths[n_paths++] = (struct kg_sb_path){.host = helper, .inside = NULL, .flags = 0};
	if (device && o->jit_dir)
		paths[n_paths++] = (struct kg_sb_path){.host = o->jit_dir, .inside = "/kgate/jit",
						       .flags = KG_SB_PATH_EXEC | (o->jit_rw ? KG_SB_PATH_RW : 0)};
	kg_python_sandbox_paths(py, script, prefix, sizeof(prefix), paths, &n_paths);
	int one = 1;
	setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	struct kg_sb_spec spec = run_spec(o, argv, envp, fds, n_fds, paths, n_paths);
	spec.allow_threads = 1; /* the interpreter's own threads; its filter applies before exec */
	/* on a device: the driver's nodes, opened several times a context, its eventfds and pipes,
	 * beside the interpreter's own files */
	if (device && !spec.limits.nofile)
		spec.limits.nofile = 256;
	/* on a device the runner applies the run filter itself, once CUDA is up (a trusted baseline's
	 * never does: only the sandbox's deny list holds there) */
	spec.seccomp_deferred = device && o->be->script_filters_itself;
	/* importing torch takes seconds on a small machine: HELLO may come late */
	double keep = s->call_timeout_s;
	if (s->call_timeout_s < 120)
		s->call_timeout_s = 120;
	rc = kg_sb_spawn(&spec, &s->sb, e);
	close(sv[1]);
	if (dev_fd >= 0)
		close(dev_fd);
	if (rc) {
		close(sv[0]);
		s->call_timeout_s = keep;
		return rc;
	}
	s->ctl = sv[0];
	s->must_filter = filtered;
	rc = hello_and_load(s, o, load_path, e);
	s->call_timeout_s = keep;
	return rc;
}

/* A runner that applies its own run filter (a Python one on a device) did so before HELLO: its
 * process has the sandbox's deny list and the profile's, as the kernel counts them. Read before
 * LOAD, so that nothing of a candidate's ever runs under the deny list alone. 0, or
 * KG_SESSION_FAILED with msg. */
static int check_filtered(struct kg_session *s)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)s->runner_pid);
	FILE *f = fopen(path, "re");
	int n = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Seccomp_filters:", 16))
			n = atoi(line + 16);
	if (f)
		fclose(f);
	/* a kernel before 5.9 has no count: the profile's own denials still name what it refuses */
	if (n < 0 || n >= 2)
		return KG_SESSION_OK;
	snprintf(s->msg, sizeof(s->msg), "the runner did not apply its run filter before HELLO (%d filter%s in place)", n,
		 n == 1 ? "" : "s");
	return KG_SESSION_FAILED;
}

/* The session's gate page (device/wire.h): a sealed 4 KiB memfd the keeper maps and registers for
 * its slot and the runner gets as fd 5; -1 (the session ungated, gate_off saying why) where the
 * keeper has no gated calls, where KGATE_NO_GATE=1, or where it refuses the page. */
static int gate_page(struct kg_session *s, kg_error *e)
{
	const char *no = getenv("KGATE_NO_GATE");
	s->gated = 0;
	if (no && *no == '1') {
		snprintf(s->gate_off, sizeof(s->gate_off), "KGATE_NO_GATE=1");
		return -1;
	}
	if (!(s->keeper->caps & KG_DEV_CAP_GATE)) {
		snprintf(s->gate_off, sizeof(s->gate_off), "kgate-device has no gated calls on this device");
		return -1;
	}
	int fd = memfd_create("kgate-gate", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	/* no runner can resize it under the keeper, which has it pinned */
	if (fd < 0 || ftruncate(fd, KG_DEV_GATE_BYTES) || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		snprintf(s->gate_off, sizeof(s->gate_off), "making the gate page: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	kg_error ge = {0};
	if (kg_keeper_gate(s->keeper, s->dev_slot, fd, &ge)) {
		snprintf(s->gate_off, sizeof(s->gate_off), "%.110s", ge.msg);
		close(fd);
		return -1;
	}
	(void)e;
	s->gated = 1;
	return fd;
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
	int dev_fd = -1, gate_fd = -1;
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
		s->dev_sets = o->dev_sets;
		s->dev_stride = o->dev_stride;
		snprintf(dev_arg, sizeof(dev_arg), "%zu", dev_bytes);
		gate_fd = gate_page(s, e);
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
	char tables[16] = "";
	argv[ac++] = "--tables";
	argv[ac++] = tables; /* filled with the fds below */
	if (gate_fd >= 0)
		argv[ac++] = "--gate";
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
	 * fd 6: its page map; a device runner's fd 5: its gate page (--gate); then the tensor tables
	 * (runner/wire.h) */
	int fds[5];
	int n_fds = runner_fds(a, sv[1], dev_fd, gate_fd, fds, tables);
	if (n_fds < 0) {
		close(sv[0]);
		close(sv[1]);
		if (dev_fd >= 0)
			close(dev_fd);
		if (gate_fd >= 0)
			close(gate_fd);
		return kg_err(e, -EINVAL, "the arena has no tensor tables for the runner");
	}
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
	struct kg_sb_spec spec = run_spec(o, argv, envp, fds, n_fds, paths, n_paths);
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
	if (gate_fd >= 0)
		close(gate_fd);
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
	if (s->gated && !(r.flags & KG_HELLO_GATED)) {
		/* said before anything untrusted ran in it: the runner could not map its gate page */
		s->gated = 0;
		snprintf(s->gate_off, sizeof(s->gate_off), "the runner could not map its gate page");
	}
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
	if (s->must_filter && s->runner_pid > 0 && (rc = check_filtered(s)))
		return rc;
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
	/* the device's free memory with everything but the candidate in place: what it holds from
	 * here on is counted against the policy's gpu.memory_mb */
	kg_error me = {0};
	if (s->keeper && s->watched && kg_keeper_meminfo(s->keeper, &s->dev_free0, &me))
		s->dev_free0 = 0;
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
	if (s->dev_free0 && kg_keeper_meminfo(s->keeper, &s->dev_free_load, &me))
		s->dev_free_load = 0;
	if (rc)
		return rc;
	s->sealed = r.info == 1;
	return KG_SESSION_OK;
}

