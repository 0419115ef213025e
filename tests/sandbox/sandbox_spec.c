/* What a spec asks for beyond its profile, as data: device patterns, /proc and /sys, extra system
 * calls, read-only opens, an unbounded memory limit; the filter description a deferred program
 * finds in KGATE_SB_FILTER (its format, strictly parsed, and that it decides over the program's own
 * options); and the specs the sandbox refuses. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "sb_test.h"
#include "sandbox/sb_int.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static int sanitize(void)
{
	return getenv("KGATE_SANITIZE") != NULL;
}

/* Runs the helper (args after its path) in spec s and returns the output; fails on a spawn error. */
static void run_helper(struct kg_sb_spec *s, const char *const *args, struct sb_run *r)
{
	const char *argv[16];
	int n = 0;
	argv[n++] = SB_HELPER_INSIDE;
	if (s->seccomp_deferred) {
		argv[n++] = "--apply";
		argv[n++] = kg_sb_profile_name(s->profile);
	}
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	s->argv = argv;
	sb_run_spec(s, r);
	s->argv = NULL;
	if (r->rc)
		fail_msg("spawn: %s", r->e.msg);
}

static void expect_out(struct kg_sb_spec *s, const char *const *args, const char *want)
{
	struct sb_run r;
	run_helper(s, args, &r);
	if (r.o.end != KG_SB_END_EXIT || !strstr(r.out, want))
		fail_msg("%s: ended %s (%s), output \"%s\", expected \"%s\"", args[0], kg_sb_end_name(r.o.end),
			 r.o.detail, r.out, want);
	sb_run_free(&r);
}

static void expect_denied(struct kg_sb_spec *s, const char *const *args, const char *call)
{
	struct sb_run r;
	run_helper(s, args, &r);
	if (r.o.end != KG_SB_END_SYSCALL || strcmp(r.o.syscall, call))
		fail_msg("%s: ended %s (%s: %s), output \"%s\", expected %s denied", args[0],
			 kg_sb_end_name(r.o.end), r.o.syscall, r.o.detail, r.out, call);
	sb_run_free(&r);
}

/* ---- the description's format ---- */

static void test_desc_round_trip(void **state)
{
	(void)state;
	struct sb_filter_desc d, back;
	kg_error e = {0};
	char buf[SB_FILTER_DESC_MAX];
	memset(&d, 0, sizeof(d));
	d.profile = KG_SB_PROFILE_RUN;
	d.allow_threads = 1;
	d.mem_bytes = 8ull << 30;
	d.readonly_opens = 1;
	assert_int_equal(sb_filter_desc_names(&d, sb_driver_syscalls, &e), 0);
	assert_true(sb_filter_desc_format(&d, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "run;threads=1;mem=8589934592;ro_opens=1;watched=0;syscalls=epoll_wait,epoll_pwait,"
				 "epoll_ctl,select,pselect6,sched_getparam,sched_getscheduler,"
				 "sched_get_priority_max,sched_get_priority_min");
	assert_int_equal(sb_filter_desc_parse(buf, &back), 0);
	assert_memory_equal(&d, &back, sizeof(d));

	memset(&d, 0, sizeof(d));
	d.profile = KG_SB_PROFILE_COMPILE;
	int len = sb_filter_desc_format(&d, buf, sizeof(buf));
	assert_int_equal(len, (int)strlen(buf));
	assert_string_equal(buf, "compile;threads=0;mem=none;ro_opens=0;watched=0;syscalls=");
	assert_int_equal(sb_filter_desc_parse(buf, &back), 0);
	assert_memory_equal(&d, &back, sizeof(d));

	/* the extremes: every name slot at full length, the largest bound */
	memset(&d, 0, sizeof(d));
	d.profile = KG_SB_PROFILE_RUN;
	d.mem_bytes = UINT64_MAX;
	d.n_syscalls = SB_FILTER_MAX_NAMES;
	for (int i = 0; i < SB_FILTER_MAX_NAMES; i++)
		snprintf(d.syscalls[i], SB_FILTER_NAME_LEN, "n%02d_%035d", i, 0);
	assert_int_equal(strlen(d.syscalls[0]), SB_FILTER_NAME_LEN - 1);
	assert_true(sb_filter_desc_format(&d, buf, sizeof(buf)) > 0);
	assert_int_equal(sb_filter_desc_parse(buf, &back), 0);
	assert_memory_equal(&d, &back, sizeof(d));
	/* and a buffer too small is an error, not a cut-off description */
	assert_int_equal(sb_filter_desc_format(&d, buf, 100), -ENAMETOOLONG);
}

static void test_desc_malformed_rejected(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"run",
		"run;",
		"gpu;threads=0;mem=none;ro_opens=0;watched=0;syscalls=",
		"run-cuda;threads=0;mem=none;ro_opens=0;watched=0;syscalls=",
		"RUN;threads=0;mem=none;ro_opens=0;watched=0;syscalls=",
		"run;threads=2;mem=none;ro_opens=0;watched=0;syscalls=",
		"run;threads=;mem=none;ro_opens=0;watched=0;syscalls=",
		"run;threads=01;mem=none;ro_opens=0;watched=0;syscalls=",
		"run;mem=none;threads=0;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=0;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=08;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=-1;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=+1;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem= 1;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=1k;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=18446744073709551616;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=NONE;ro_opens=0;watched=0;syscalls=",
		"run;threads=0;mem=none;ro_opens=0",
		"run;threads=0;mem=none;ro_opens=0;",
		"run;threads=0;mem=none;ro_opens=0;syscalls",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=select;",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=select;extra=1",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=a,,b",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=a,",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=,a",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=Select",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=sel ect",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=select\n",
		"run; threads=0;mem=none;ro_opens=0;watched=0;syscalls=",
		" run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=",
		/* what the baseline denies, or what the profile checks by argument, never by name */
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=ptrace",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=select,openat",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=mmap",
		"run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=execveat",
	};
	struct sb_filter_desc d;
	for (size_t i = 0; i < KG_ARRAY_LEN(bad); i++)
		if (sb_filter_desc_parse(bad[i], &d) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i]);
	assert_int_equal(sb_filter_desc_parse(NULL, &d), -EINVAL);
	/* one name too long, one name too many, one byte too long */
	char buf[SB_FILTER_DESC_MAX + 64];
	int n = snprintf(buf, sizeof(buf), "run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=");
	memset(buf + n, 'a', SB_FILTER_NAME_LEN);
	buf[n + SB_FILTER_NAME_LEN] = '\0';
	assert_int_equal(sb_filter_desc_parse(buf, &d), -EINVAL);
	buf[n + SB_FILTER_NAME_LEN - 1] = '\0';
	assert_int_equal(sb_filter_desc_parse(buf, &d), 0);
	for (int i = 0; i <= SB_FILTER_MAX_NAMES; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%sa", i ? "," : "");
	assert_int_equal(sb_filter_desc_parse(buf, &d), -EINVAL);
	memset(buf, 0, sizeof(buf));
	n = snprintf(buf, sizeof(buf), "run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=a");
	for (; n < SB_FILTER_DESC_MAX; n += 2)
		memcpy(buf + n, ",a", 2);
	assert_int_equal(sb_filter_desc_parse(buf, &d), -EINVAL);
	/* the largest bound is fine */
	assert_int_equal(sb_filter_desc_parse("run;threads=0;mem=18446744073709551615;ro_opens=0;watched=0;syscalls=", &d), 0);
	assert_true(d.mem_bytes == UINT64_MAX);
}

static void test_desc_names_checked(void **state)
{
	(void)state;
	struct sb_filter_desc d;
	kg_error e = {0};
	memset(&d, 0, sizeof(d));
	assert_int_equal(sb_filter_desc_names(&d, ARGS("select", "ptrace"), &e), -EPERM);
	assert_non_null(strstr(e.msg, "ptrace"));
	assert_int_equal(sb_filter_desc_names(&d, ARGS("ioctl"), &e), -EPERM);
	assert_int_equal(sb_filter_desc_names(&d, ARGS("clone"), &e), -EPERM);
	assert_int_equal(sb_filter_desc_names(&d, ARGS("Select"), &e), -EINVAL);
	assert_int_equal(sb_filter_desc_names(&d, ARGS(""), &e), -EINVAL);
	const char *many[SB_FILTER_MAX_NAMES + 2];
	for (int i = 0; i <= SB_FILTER_MAX_NAMES; i++)
		many[i] = "select";
	many[SB_FILTER_MAX_NAMES + 1] = NULL;
	assert_int_equal(sb_filter_desc_names(&d, many, &e), -E2BIG);
	many[SB_FILTER_MAX_NAMES] = NULL;
	assert_int_equal(sb_filter_desc_names(&d, many, &e), 0);
	assert_int_equal(d.n_syscalls, SB_FILTER_MAX_NAMES);
	assert_int_equal(sb_filter_desc_names(&d, NULL, &e), 0);
	assert_int_equal(d.n_syscalls, 0);
}

/* ---- what spawn exports and refuses ---- */

static void test_env_describes_spec(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/sh", "-c", "echo \"[$KGATE_SB_FILTER]\"", NULL};
	static const char *const env[] = {"PATH=/bin", "KGATE_SB_FILTER=run;threads=1;mem=none;ro_opens=0;watched=0;syscalls=",
		NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	s.seccomp_deferred = 1;
	s.allow_threads = 1;
	s.readonly_opens = 1;
	s.limits.mem_bytes = 1ull << 30;
	s.syscalls = ARGS("select", "epoll_wait");
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, sanitize() ? "[compile;threads=1;mem=none;ro_opens=1;watched=0;syscalls=select,epoll_wait]\n"
					      : "[compile;threads=1;mem=1073741824;ro_opens=1;watched=0;syscalls=select,epoll_wait]\n");
	sb_run_free(&r);
	/* the caller's environment cannot smuggle a description in */
	s.envp = env;
	s.syscalls = NULL;
	s.limits.mem_bytes = KG_SB_MEM_UNBOUNDED;
	sb_run_spec(&s, &r);
	assert_string_equal(r.out, "[compile;threads=1;mem=none;ro_opens=1;watched=0;syscalls=]\n");
	sb_run_free(&r);
	/* only a deferred program gets one */
	s.seccomp_deferred = 0;
	sb_run_spec(&s, &r);
	assert_string_equal(r.out, "[]\n");
	sb_run_free(&r);
}

static void test_spec_refused(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, ARGS("/bin/true"));
	s.syscalls = ARGS("select", "ptrace");
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EPERM);
	assert_non_null(strstr(e.msg, "ptrace"));
	s.syscalls = ARGS("openat");
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EPERM);
	s.syscalls = ARGS("no such call");
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EINVAL);
	s.syscalls = NULL;
	s.devices = ARGS("dev/null");
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EINVAL);
	s.devices = NULL;
	s.proc = (enum kg_sb_proc)(KG_SB_PROC_RW + 1);
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EINVAL);
	s.proc = KG_SB_PROC_DEFAULT;
	s.profile = (enum kg_sb_profile)(KG_SB_PROFILE_RUN + 1);
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EINVAL);
	assert_null(c);
	/* names unknown on this architecture are skipped, as in the profiles' own tables; names the
	 * profile allows anyway, or twice, are harmless */
	struct kg_sb_outcome o;
	const char *const *const fine[] = {ARGS("kgate_no_such_call"), ARGS("select", "select"),
		sb_driver_syscalls};
	for (int prof = KG_SB_PROFILE_COMPILE; prof <= KG_SB_PROFILE_RUN; prof++) {
		for (size_t i = 0; i < KG_ARRAY_LEN(fine); i++) {
			s.profile = (enum kg_sb_profile)prof;
			s.syscalls = fine[i];
			if (kg_sb_spawn(&s, &c, &e))
				fail_msg("%s: %s", fine[i][0], e.msg);
			kg_sb_wait(c, &o);
			assert_int_equal(o.end, KG_SB_END_EXIT);
			assert_int_equal(o.layers_failed & KG_SB_LAYER_SECCOMP, 0);
			kg_sb_free(c);
		}
	}
}

/* ---- the data paths ---- */

static void test_devices(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct stat st;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, NULL);
	/* /dev/tty is no default node: absent without a pattern; with one, present (ENXIO: we have no
	 * controlling terminal) and open for writing */
	if (!stat("/dev/tty", &st) && S_ISCHR(st.st_mode)) {
		expect_out(&s, ARGS("open-w", "/dev/tty"), "RESULT open-w ENOENT");
		s.devices = ARGS("/dev/tt[y]", "/dev/kgate-none*", "/dev/nul*");
		expect_out(&s, ARGS("open-w", "/dev/tty"), "RESULT open-w ENXIO");
		expect_out(&s, ARGS("open-w", "/dev/null"), "RESULT open-w ok");
		s.seccomp_deferred = 1;
		expect_out(&s, ARGS("open-w", "/dev/tty"), "RESULT open-w ENXIO");
		s.seccomp_deferred = 0;
	}
	/* a match is bound when it is a device or a directory of devices only; regular files,
	 * symlinks and directories holding anything else stay out */
	char dir[] = "/var/tmp/kgate-devs-XXXXXX", path[PATH_MAX], pat[PATH_MAX];
	assert_non_null(mkdtemp(dir));
	kg_error e = {0};
	snprintf(path, sizeof(path), "%s/d-empty", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/d-mixed", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/d-mixed/file", dir);
	assert_int_equal(kg_write_file(path, "x", 1, 0644, &e), 0);
	snprintf(path, sizeof(path), "%s/f-reg", dir);
	assert_int_equal(kg_write_file(path, "x", 1, 0644, &e), 0);
	snprintf(path, sizeof(path), "%s/l-link", dir);
	assert_int_equal(symlink("/dev/null", path), 0);
	snprintf(pat, sizeof(pat), "%s/*", dir);
	s.devices = (const char *const[]){pat, NULL};
	/* (Landlock keeps the parent unlistable: look at each entry) */
	static const char *const out[] = {"d-mixed", "f-reg", "l-link"};
	for (size_t i = 0; i < KG_ARRAY_LEN(out); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, out[i]);
		expect_out(&s, ARGS("open", path), "RESULT open ENOENT");
	}
	snprintf(path, sizeof(path), "%s/d-empty", dir);
	expect_out(&s, ARGS("ls", path), "LS ");
	kg_rmtree(dir);
}

static void test_proc(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, NULL);
	/* a run has none by default (sanitizer runtimes need it read-only), nor when told so */
	const char *none = sanitize() ? "RESULT open ok" : "RESULT open ENOENT";
	expect_out(&s, ARGS("open", "/proc/self/status"), none);
	s.proc = KG_SB_PROC_NONE;
	expect_out(&s, ARGS("open", "/proc/self/status"), none);
	s.proc = KG_SB_PROC_RO;
	expect_out(&s, ARGS("open", "/proc/self/status"), "RESULT open ok");
	struct sb_run r;
	run_helper(&s, ARGS("create", "/proc/self/comm"), &r);
	assert_true(strstr(r.out, "RESULT create EROFS") || strstr(r.out, "RESULT create EACCES"));
	sb_run_free(&r);
	/* writable: a driver names its threads there */
	s.proc = KG_SB_PROC_RW;
	expect_out(&s, ARGS("open", "/proc/self/status"), "RESULT open ok");
	expect_out(&s, ARGS("create", "/proc/self/comm"), "RESULT create ok");
	/* compile reads it by default */
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, NULL);
	expect_out(&s, ARGS("open", "/proc/self/status"), "RESULT open ok");
	s.proc = KG_SB_PROC_NONE;
	expect_out(&s, ARGS("open", "/proc/self/status"), none);
}

static void test_sys(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct stat st;
	if (stat("/sys/devices", &st))
		skip();
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, NULL);
	expect_out(&s, ARGS("ls", "/sys"), "RESULT ls ENOENT");
	s.sys_ro = 1;
	expect_out(&s, ARGS("ls", "/sys"), " devices");
	struct sb_run r;
	run_helper(&s, ARGS("create", "/sys/kgate-test"), &r);
	assert_true(strstr(r.out, "RESULT create EROFS") || strstr(r.out, "RESULT create EACCES"));
	sb_run_free(&r);
}

static void test_extra_syscalls(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, NULL);
	/* denied by the run profile, allowed when the spec lists it: spawn's filter and a deferred
	 * program's own both */
	for (int deferred = 0; deferred <= 1; deferred++) {
		s.seccomp_deferred = deferred;
		s.syscalls = NULL;
		expect_denied(&s, ARGS("select"), "select");
		s.syscalls = ARGS("epoll_wait", "select");
		expect_out(&s, ARGS("select"), "RESULT select ok");
	}
	/* the program's own list does not count inside a sandbox */
	s.syscalls = NULL;
	expect_denied(&s, ARGS("--syscall", "select", "select"), "select");
}

static void test_readonly_opens(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, NULL);
	expect_out(&s, ARGS("create", "/tmp/kgate-test"), "RESULT create ok");
	expect_out(&s, ARGS("open-w", "/dev/null"), "RESULT open-w ok");
	s.readonly_opens = 1;
	for (int deferred = 0; deferred <= 1; deferred++) {
		s.seccomp_deferred = deferred;
		expect_denied(&s, ARGS("create", "/tmp/kgate-test"), "openat");
		expect_denied(&s, ARGS("open-w", "/dev/null"), "openat");
		expect_out(&s, ARGS("open", "/dev/null"), "RESULT open ok");
	}
}

static void test_memory_unbounded(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, NULL);
	expect_out(&s, ARGS("rlimit-as"), sanitize() ? "RLIMIT_AS unlimited" : "RLIMIT_AS 8589934592");
	s.limits.mem_bytes = KG_SB_MEM_UNBOUNDED;
	expect_out(&s, ARGS("rlimit-as"), "RLIMIT_AS unlimited");
	/* and no mapping bound in either filter: whatever the kernel answers, it is no denial */
	expect_out(&s, ARGS("malloc", "30"), "RESULT malloc");
	s.seccomp_deferred = 1;
	expect_out(&s, ARGS("malloc", "30"), "RESULT malloc");
	expect_out(&s, ARGS("rlimit-as"), "RLIMIT_AS unlimited");
}

/* A GPU driver's address space: no RLIMIT_AS, yet one mapping past mem_bytes is still the
 * memory end (a CUDA runner once failed cuInit with "out of memory" under RLIMIT_AS). */
static void test_address_space_unbounded(void **state)
{
	(void)state;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, NULL);
	s.limits.mem_bytes = 1ull << 30;
	expect_out(&s, ARGS("rlimit-as"), sanitize() ? "RLIMIT_AS unlimited" : "RLIMIT_AS 1073741824");
	s.limits.address_space_unbounded = 1;
	expect_out(&s, ARGS("rlimit-as"), "RLIMIT_AS unlimited");
	if (sanitize())
		return; /* ASan builds lift every mapping bound */
	run_helper(&s, ARGS("malloc", "2"), &r);
	if (r.o.end != KG_SB_END_MEMORY)
		fail_msg("malloc 2 GiB: ended %s (%s), output \"%s\"", kg_sb_end_name(r.o.end), r.o.detail, r.out);
	sb_run_free(&r);
}

/* ---- kg_sb_seccomp_apply outside a sandbox: the program's own options ---- */

/* Runs the helper on the host (no sandbox) with extra environment; returns its wait status. */
static int run_on_host(const char *const *args, const char *extra_env, char *out, size_t outsz)
{
	const char *argv[16], *envp[8];
	int n = 0, k = 0, p[2];
	argv[n++] = sb_helper_host();
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	for (int i = 0; sb_test_env[i] && k < 6; i++)
		envp[k++] = sb_test_env[i];
	if (extra_env)
		envp[k++] = extra_env;
	envp[k] = NULL;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execve(argv[0], (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t got;
	while (len + 1 < outsz && (got = read(p[0], out + len, outsz - 1 - len)) > 0)
		len += (size_t)got;
	out[len] = '\0';
	close(p[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void test_apply_outside_sandbox(void **state)
{
	(void)state;
	char out[4096];
	/* no notification listener out here: a denial kills */
	int st = run_on_host(ARGS("--apply", "run", "select"), NULL, out, sizeof(out));
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	st = run_on_host(ARGS("--apply", "run", "--syscall", "select", "select"), NULL, out, sizeof(out));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_string_equal(out, "RESULT select ok\n");
	st = run_on_host(ARGS("--apply", "run", "--ro-opens", "open-w", "/dev/null"), NULL, out, sizeof(out));
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	/* a reserved name is an error, and nothing is loaded */
	st = run_on_host(ARGS("--apply", "run", "--syscall", "ptrace", "true"), NULL, out, sizeof(out));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
	assert_non_null(strstr(out, "APPLY-FAILED"));
	/* a description in the environment wins over the options, both ways */
	st = run_on_host(ARGS("--apply", "run", "select"),
			 "KGATE_SB_FILTER=run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=select", out, sizeof(out));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = run_on_host(ARGS("--apply", "run", "--syscall", "select", "select"),
			 "KGATE_SB_FILTER=run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=", out, sizeof(out));
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	/* and a malformed one is an error, never a weaker filter */
	static const char *const bad[] = {"KGATE_SB_FILTER=", "KGATE_SB_FILTER=run",
		"KGATE_SB_FILTER=run;threads=0;mem=none;ro_opens=0;watched=0;syscalls=ptrace"};
	for (size_t i = 0; i < KG_ARRAY_LEN(bad); i++) {
		st = run_on_host(ARGS("--apply", "run", "true"), bad[i], out, sizeof(out));
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
		assert_non_null(strstr(out, "APPLY-FAILED"));
		assert_non_null(strstr(out, "malformed KGATE_SB_FILTER"));
	}
}

int main(void)
{
	if (!sb_helpers_host()) {
		fprintf(stderr, "cannot locate the test helpers\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_desc_round_trip),
		cmocka_unit_test(test_desc_malformed_rejected),
		cmocka_unit_test(test_desc_names_checked),
		cmocka_unit_test(test_env_describes_spec),
		cmocka_unit_test(test_spec_refused),
		cmocka_unit_test(test_devices),
		cmocka_unit_test(test_proc),
		cmocka_unit_test(test_sys),
		cmocka_unit_test(test_extra_syscalls),
		cmocka_unit_test(test_readonly_opens),
		cmocka_unit_test(test_memory_unbounded),
		cmocka_unit_test(test_address_space_unbounded),
		cmocka_unit_test(test_apply_outside_sandbox),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
