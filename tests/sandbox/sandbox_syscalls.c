/* The try-syscall suite (after bubblewrap's tests/try-syscall.c, except that here a denial must
 * kill and be reported by name): the helper performs one action under each kind of spec (compile,
 * run, and a driver-like run built from data), as a program that applies its own filter
 * (seccomp_deferred, like the real runner) or not, and the outcome must be the refusal we promise.
 * Also: compiling under the compile profile, and what it must not reach (host files, network). */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "sb_test.h"


static char parent_pid[16];

static int output_has(const char *out, const char *want)
{
	/* want: alternatives separated by '|' */
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", want);
	for (char *save = NULL, *alt = strtok_r(buf, "|", &save); alt; alt = strtok_r(NULL, "|", &save))
		if (strstr(out, alt))
			return 1;
	return 0;
}

/* Runs the helper with args ("@PARENT" becomes our pid) and checks the end: for EXIT the output
 * must hold `want` (or one of its '|' alternatives), for SYSCALL and MEMORY the call must be named
 * `want`. With deferred, the helper applies the spec's filter itself after start-up. */
static void expect(enum sb_kind kind, int deferred, unsigned disabled, const char *const *args,
		   enum kg_sb_end end, const char *want)
{
	const char *argv[16];
	int n = 0;
	argv[n++] = SB_HELPER_INSIDE;
	if (deferred) {
		argv[n++] = "--apply";
		argv[n++] = kg_sb_profile_name(sb_kind_profile(kind));
	}
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = !strcmp(args[i], "@PARENT") ? parent_pid : args[i];
	argv[n] = NULL;
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec_kind(&s, paths, kind, argv);
	s.seccomp_deferred = deferred;
	s.disabled = disabled;
	s.limits.wall_s = 10;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	if (r.o.end != end)
		fail_msg("%s %s: ended %s (%s: %s), expected %s", sb_kind_name(kind), args[0], kg_sb_end_name(r.o.end),
			 r.o.syscall, r.o.detail, kg_sb_end_name(end));
	if (end == KG_SB_END_EXIT && want && !output_has(r.out, want))
		fail_msg("%s %s: output \"%s\" lacks \"%s\"", sb_kind_name(kind), args[0], r.out, want);
	if ((end == KG_SB_END_SYSCALL || end == KG_SB_END_MEMORY) && want) {
		assert_string_equal(r.o.syscall, want);
		assert_true(r.o.syscall_nr >= 0);
		assert_non_null(strstr(r.o.detail, want));
	}
	/* denials name the filter by the spec's name */
	if (end == KG_SB_END_SYSCALL && want)
		assert_non_null(strstr(r.o.detail, sb_kind_name(kind)));
	sb_run_free(&r);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* every kind, spawned with its filter, and the run kinds applying their own */
static void expect_everywhere(const char *const *args, enum kg_sb_end end, const char *want)
{
	for (enum sb_kind k = SB_COMPILE; k <= SB_DRIVER; k++)
		expect(k, 0, 0, args, end, want);
	expect(SB_RUN, 1, 0, args, end, want);
	expect(SB_DRIVER, 1, 0, args, end, want);
}

static const char *repo_file(void)
{
	static char path[PATH_MAX];
	const char *home = getenv("KGATE_HOME");
	if (home && *home) {
		snprintf(path, sizeof(path), "%s/Makefile", home);
	} else {
		/* BUILD/tests/helpers -> the tree BUILD sits in */
		snprintf(path, sizeof(path), "%s/../../../Makefile", sb_helpers_host());
	}
	return path;
}

static void test_host_files_out_of_reach(void **state)
{
	(void)state;
	expect_everywhere(ARGS("open", "/etc/shadow"), KG_SB_END_EXIT, "RESULT open ENOENT");
	expect_everywhere(ARGS("open", "/root"), KG_SB_END_EXIT, "RESULT open ENOENT");
	expect_everywhere(ARGS("open", repo_file()), KG_SB_END_EXIT, "RESULT open ENOENT");
	expect_everywhere(ARGS("open", "/etc/passwd"), KG_SB_END_EXIT, "RESULT open ENOENT");
}

static void test_no_network(void **state)
{
	(void)state;
	expect_everywhere(ARGS("socket"), KG_SB_END_SYSCALL, "socket");
	expect_everywhere(ARGS("connect", "22"), KG_SB_END_SYSCALL, "socket");
}

static void test_no_exec_in_run_profiles(void **state)
{
	(void)state;
	expect(SB_RUN, 0, 0, ARGS("execve"), KG_SB_END_SYSCALL, "execve");
	expect(SB_DRIVER, 0, 0, ARGS("execve"), KG_SB_END_SYSCALL, "execve");
	expect(SB_RUN, 1, 0, ARGS("execve"), KG_SB_END_SYSCALL, "execve");
	expect(SB_COMPILE, 0, 0, ARGS("execve"), KG_SB_END_EXIT, NULL);
}

/* torch's oneDNN asks arch_prctl for the AMX tile state on CPUs that have it: a denial killed every
 * conv module's derivation and run on such a host. */
static void test_xcomp_permission_asked(void **state)
{
	(void)state;
	expect_everywhere(ARGS("xcomp"), KG_SB_END_EXIT, "RESULT xcomp ok");
}

/* A tool's channel (compute-sanitizer's socket) is usable after the filter only when the program
 * names it; other sockets above the handed fds stay closed to sendmsg and friends. */
static void test_tool_socket_only_when_named(void **state)
{
	(void)state;
	expect(SB_RUN, 1, 0, ARGS("--tool-socket-allowed", "tool-send"), KG_SB_END_EXIT,
	       "RESULT tool-send ok");
	expect(SB_RUN, 1, 0, ARGS("--tool-socket", "tool-send"), KG_SB_END_SYSCALL, "sendto");
	expect(SB_DRIVER, 1, 0, ARGS("--tool-socket", "tool-send"), KG_SB_END_SYSCALL, "sendto");
}

static void test_no_fork_in_run(void **state)
{
	(void)state;
	expect(SB_RUN, 0, 0, ARGS("fork"), KG_SB_END_SYSCALL, "clone");
	expect(SB_RUN, 1, 0, ARGS("fork"), KG_SB_END_SYSCALL, "clone");
	expect(SB_RUN, 1, 0, ARGS("threads"), KG_SB_END_SYSCALL, "clone");
	/* the spec decides: a program asking for threads the spec does not allow gets none */
	expect(SB_RUN, 1, 0, ARGS("--threads", "threads"), KG_SB_END_SYSCALL, "clone");
	expect(SB_COMPILE, 0, 0, ARGS("fork"), KG_SB_END_EXIT, "RESULT fork ok");
	/* threads where the spec allows them: the helper's filter learns it from the spec alone */
	static const char *const argv[] = {SB_HELPER_INSIDE, "--apply", "run", "threads", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.seccomp_deferred = 1;
	s.allow_threads = 1;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_string_equal(r.out, "RESULT threads ok\n");
	sb_run_free(&r);
}

static void test_no_ptrace_no_peeking(void **state)
{
	(void)state;
	expect_everywhere(ARGS("ptrace", "1"), KG_SB_END_SYSCALL, "ptrace");
	expect_everywhere(ARGS("ptrace", "@PARENT"), KG_SB_END_SYSCALL, "ptrace");
	expect_everywhere(ARGS("pvread", "@PARENT"), KG_SB_END_SYSCALL, "process_vm_readv");
	expect_everywhere(ARGS("pvread", "1"), KG_SB_END_SYSCALL, "process_vm_readv");
	/* our pid does not exist in the sandbox's pid namespace, nor does /proc in a plain run */
	char mem[64];
	snprintf(mem, sizeof(mem), "/proc/%s/mem", parent_pid);
	expect_everywhere(ARGS("open", mem), KG_SB_END_EXIT, "RESULT open ENOENT");
	/* init shares the caller's memory: the program may not open it */
	expect(SB_COMPILE, 0, 0, ARGS("open", "/proc/1/mem"), KG_SB_END_EXIT, "RESULT open EACCES");
	expect(SB_COMPILE, 0, 0, ARGS("open", "/proc/1/maps"), KG_SB_END_EXIT, "RESULT open EACCES");
	expect(SB_DRIVER, 1, 0, ARGS("open", "/proc/1/mem"), KG_SB_END_EXIT, "RESULT open EACCES");
}

static void test_no_killing_others(void **state)
{
	(void)state;
	expect(SB_RUN, 0, 0, ARGS("kill", "1"), KG_SB_END_SYSCALL, "kill");
	expect(SB_RUN, 1, 0, ARGS("kill", "1"), KG_SB_END_SYSCALL, "kill");
	expect(SB_DRIVER, 0, 0, ARGS("kill", "@PARENT"), KG_SB_END_SYSCALL, "kill");
	expect(SB_RUN, 0, 0, ARGS("kill", "-1"), KG_SB_END_SYSCALL, "kill");
	/* compile may signal its own processes only: we are not in its pid namespace, and its
	 * init ignores it */
	expect(SB_COMPILE, 0, 0, ARGS("kill", "@PARENT"), KG_SB_END_EXIT, "RESULT kill ESRCH");
	expect(SB_COMPILE, 0, 0, ARGS("kill", "1"), KG_SB_END_EXIT, "RESULT kill ok");
	/* and raising a signal on itself is a crash as usual */
	expect(SB_RUN, 1, 0, ARGS("abort"), KG_SB_END_SIGNAL, NULL);
}

static void test_no_mount_no_setuid(void **state)
{
	(void)state;
	expect_everywhere(ARGS("mount"), KG_SB_END_SYSCALL, "mount");
	expect_everywhere(ARGS("setuid"), KG_SB_END_SYSCALL, "setuid");
}

static void test_no_raising_limits(void **state)
{
	(void)state;
	/* glibc's setrlimit is prlimit64 */
	expect(SB_RUN, 0, 0, ARGS("rlimit"), KG_SB_END_SYSCALL, "prlimit64");
	expect(SB_RUN, 1, 0, ARGS("prlimit"), KG_SB_END_SYSCALL, "prlimit64");
	expect(SB_DRIVER, 0, 0, ARGS("prlimit"), KG_SB_END_SYSCALL, "prlimit64");
	/* the toolchain may set its soft limits; the kernel refuses raising a hard one */
	expect(SB_COMPILE, 0, 0, ARGS("rlimit"), KG_SB_END_EXIT, "RESULT rlimit EPERM");
	expect(SB_COMPILE, 0, 0, ARGS("prlimit"), KG_SB_END_EXIT, "RESULT prlimit EPERM");
}

static void test_writes_stay_in_scratch(void **state)
{
	(void)state;
	/* read-only mounts and Landlock both refuse; which answers first is the kernel's choice */
	static const char *const refused = "RESULT create EROFS|RESULT create EACCES";
	static const char *const paths_out[] = {"/usr/kgate-test", "/kgate-test", "/etc/kgate-test", "/dev/kgate-test"};
	for (size_t i = 0; i < KG_ARRAY_LEN(paths_out); i++) {
		expect(SB_COMPILE, 0, 0, ARGS("create", paths_out[i]), KG_SB_END_EXIT, refused);
		expect(SB_RUN, 0, 0, ARGS("create", paths_out[i]), KG_SB_END_EXIT, refused);
		expect(SB_RUN, 1, 0, ARGS("create", paths_out[i]), KG_SB_END_EXIT, refused);
		/* driver-like: files open for reading only (its /proc is writable for the driver) */
		expect(SB_DRIVER, 0, 0, ARGS("create", paths_out[i]), KG_SB_END_SYSCALL, "openat");
		expect(SB_DRIVER, 1, 0, ARGS("create", paths_out[i]), KG_SB_END_SYSCALL, "openat");
	}
	expect(SB_COMPILE, 0, 0, ARGS("create", "/tmp/kgate-test"), KG_SB_END_EXIT, "RESULT create ok");
	expect(SB_RUN, 1, 0, ARGS("create", "/tmp/kgate-test"), KG_SB_END_EXIT, "RESULT create ok");
	/* patching one's own harness through /proc/self/mem */
	expect(SB_COMPILE, 0, 0, ARGS("create", "/proc/self/mem"), KG_SB_END_EXIT, refused);
	expect(SB_DRIVER, 1, 0, ARGS("create", "/proc/self/mem"), KG_SB_END_SYSCALL, "openat");
	expect(SB_RUN, 1, 0, ARGS("create", "/proc/self/mem"), KG_SB_END_EXIT,
	       getenv("KGATE_SANITIZE") ? refused : "RESULT create ENOENT");
	/* without the mount namespace Landlock refuses instead */
	const char *argv[] = {sb_helper_host(), "create", "/usr/kgate-test", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	paths[0].inside = NULL;
	s.disabled = KG_SB_LAYER_MOUNTNS;
	sb_run_spec(&s, &r);
	if (r.o.layers_active & KG_SB_LAYER_LANDLOCK)
		assert_string_equal(r.out, "RESULT create EACCES\n");
	sb_run_free(&r);
}

static void test_fork_bomb(void **state)
{
	(void)state;
	char mark[64], pattern[80];
	snprintf(mark, sizeof(mark), "kgate-bomb-%d", (int)getpid());
	snprintf(pattern, sizeof(pattern), "forkbomb %s", mark);
	const char *argv[] = {SB_HELPER_INSIDE, "forkbomb", mark, NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	s.limits.wall_s = 2;
	s.limits.nproc = 64;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_TIMEOUT);
	assert_true(r.o.wall_s < 6);
	/* nothing of it survives the outcome (allow the kernel a moment to finish the reaping) */
	int left = 1;
	for (int i = 0; i < 200 && (left = sb_count_procs(pattern)); i++)
		usleep(10000);
	assert_int_equal(left, 0);
	sb_run_free(&r);
}

static void test_infinite_loop(void **state)
{
	(void)state;
	static const char *const argv[] = {SB_HELPER_INSIDE, "loop", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.limits.wall_s = 0.5;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_TIMEOUT);
	assert_non_null(strstr(r.o.detail, "wall-clock"));
	sb_run_free(&r);
	/* and the CPU limit, for a child that nobody watches closely */
	s.limits.wall_s = 20;
	s.limits.cpu_s = 1;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_TIMEOUT);
	assert_non_null(strstr(r.o.detail, "CPU"));
	assert_true(r.o.wall_s < 10);
	sb_run_free(&r);
}

static void test_huge_malloc(void **state)
{
	(void)state;
	/* Sanitizer builds spawn without the mapping bound (ASan's shadow is mapped under the filter
	 * there): the kernel's overcommit check or RLIMIT_AS refuses instead. */
	int san = getenv("KGATE_SANITIZE") != NULL;
	expect(SB_RUN, 0, 0, ARGS("malloc", "30"), san ? KG_SB_END_EXIT : KG_SB_END_MEMORY,
	       san ? "RESULT malloc ENOMEM" : "mmap");
	expect(SB_COMPILE, 0, 0, ARGS("malloc", "30"), san ? KG_SB_END_EXIT : KG_SB_END_MEMORY,
	       san ? "RESULT malloc ENOMEM" : "mmap");
	/* the spec's bound reaches a program that applies its own filter (KG_SB_ENV_FILTER) */
	expect(SB_RUN, 1, 0, ARGS("malloc", "30"), san ? KG_SB_END_EXIT : KG_SB_END_MEMORY,
	       san ? "RESULT malloc" : "mmap");
	/* and without a filter RLIMIT_AS still refuses */
	if (!san)
		expect(SB_RUN, 0, KG_SB_LAYER_SECCOMP, ARGS("malloc", "30"), KG_SB_END_EXIT, "RESULT malloc ENOMEM");
	/* the spec's own bound, named in the report */
	static const char *const argv[] = {SB_HELPER_INSIDE, "--apply", "run", "malloc", "2", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.seccomp_deferred = 1;
	s.limits.mem_bytes = 1ull << 30;
	sb_run_spec(&s, &r);
	if (san) {
		assert_int_equal(r.o.end, KG_SB_END_EXIT);
	} else {
		assert_int_equal(r.o.end, KG_SB_END_MEMORY);
		assert_string_equal(kg_sb_end_name(r.o.end), "memory");
		assert_string_equal(r.o.syscall, "mmap");
		assert_non_null(strstr(r.o.detail, "mmap of 2147"));
		assert_non_null(strstr(r.o.detail, "limit 1073741824"));
	}
	sb_run_free(&r);
	/* the spec decides, not the program's own options: a --mem of one page is ignored inside */
	expect(SB_RUN, 1, 0, ARGS("--mem", "4096", "malloc", "1"), KG_SB_END_EXIT, "RESULT malloc ok");
	/* a reasonable allocation is fine */
	expect(SB_RUN, 0, 0, ARGS("malloc", "1"), KG_SB_END_EXIT, "RESULT malloc ok");
}

/* ---- compiling ---- */

static char workdir[PATH_MAX];

static int write_text(const char *dir, const char *name, const char *text, int mode)
{
	char path[PATH_MAX];
	kg_error e = {0};
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return kg_write_file(path, text, strlen(text), mode, &e);
}

static int setup_workdir(void **state)
{
	(void)state;
	snprintf(workdir, sizeof(workdir), "/tmp/kgate-sbtest-XXXXXX");
	if (!mkdtemp(workdir))
		return -1;
	kg_error e = {0};
	if (write_text(workdir, "good.c", "float f(float x) { return x * x + 2; }\n", 0644) ||
	    write_text(workdir, "evil.c",
		       "#include <sys/socket.h>\n"
		       "__attribute__((constructor)) static void grab(void) { socket(AF_INET, SOCK_STREAM, 0); }\n",
		       0644) ||
	    write_text(workdir, "shadow.c", "#include \"/etc/shadow\"\n", 0644) ||
	    kg_sb_chown_scratch(workdir, &e))
		return -1;
	return 0;
}

static int teardown_workdir(void **state)
{
	(void)state;
	if (workdir[0])
		kg_rmtree(workdir);
	return 0;
}

static void compile(const char *src, const char *out, unsigned disabled, struct sb_run *r)
{
	const char *argv[] = {"/usr/bin/cc", "-O2", "-shared", "-fPIC", src, "-o", out, NULL};
	struct kg_sb_path paths[2];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	paths[1] = (struct kg_sb_path){workdir, "/work", KG_SB_PATH_RW};
	s.n_paths = 2;
	s.cwd = "/work";
	s.disabled = disabled;
	s.limits.wall_s = 60;
	sb_run_spec(&s, r);
}

static void test_compile_works(void **state)
{
	(void)state;
	struct sb_run r;
	char so[PATH_MAX];
	if (access("/usr/bin/cc", X_OK))
		skip();
	snprintf(so, sizeof(so), "%s/good.so", workdir);
	unlink(so);
	compile("good.c", "good.so", 0, &r);
	assert_int_equal(r.rc, 0);
	if (r.o.end != KG_SB_END_EXIT || r.o.exit_code)
		fail_msg("compile failed: %s %s\n%s", r.o.syscall, r.o.detail, r.out);
	struct stat st;
	assert_int_equal(stat(so, &st), 0);
	assert_true(st.st_size > 0);
	assert_int_equal(st.st_uid, geteuid() == 0 ? 65534u : geteuid());
	sb_run_free(&r);
}

static void test_compile_cannot_read_host_files(void **state)
{
	(void)state;
	if (access("/usr/bin/cc", X_OK))
		skip();
	/* a secret root can read on the host, with a marker that must never show up in the output */
	char dir[] = "/var/tmp/kgate-secret-XXXXXX", marker[64], text[128], src[PATH_MAX + 32];
	assert_non_null(mkdtemp(dir));
	snprintf(marker, sizeof(marker), "KGATE_MARKER_%d_%lu", (int)getpid(), (unsigned long)kg_now_ns());
	snprintf(text, sizeof(text), "int %s = 1;\n#error %s\n", marker, marker);
	assert_int_equal(write_text(dir, "secret.h", text, 0600), 0);
	snprintf(src, sizeof(src), "#include \"%s/secret.h\"\n", dir);
	assert_int_equal(write_text(workdir, "steal.c", src, 0644), 0);
	kg_error e = {0};
	assert_int_equal(kg_sb_chown_scratch(workdir, &e), 0);
	struct sb_run r;
	compile("steal.c", "steal.so", 0, &r);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_int_not_equal(r.o.exit_code, 0);
	assert_non_null(strstr(r.out, "No such file"));
	assert_null(strstr(r.out, marker));
	sb_run_free(&r);
	/* the same through Landlock alone: the file exists but stays closed */
	compile("steal.c", "steal.so", KG_SB_LAYER_MOUNTNS, &r);
	if (r.rc == -EPERM) { /* the workdir is moved to /work: needs the mount namespace */
		sb_run_free(&r);
	} else {
		assert_null(strstr(r.out, marker));
		sb_run_free(&r);
	}
	compile("shadow.c", "shadow.so", 0, &r);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_int_not_equal(r.o.exit_code, 0);
	assert_null(strstr(r.out, "root:"));
	sb_run_free(&r);
	kg_rmtree(dir);
}

static void test_compile_no_network(void **state)
{
	(void)state;
	/* a listener on the host's loopback the sandbox must not reach */
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	char port[16];
	snprintf(port, sizeof(port), "%d", ntohs(sa.sin_port));
	/* seccomp first: socket() is denied and named */
	expect(SB_COMPILE, 0, 0, ARGS("connect", port), KG_SB_END_SYSCALL, "socket");
	/* without seccomp, Landlock refuses TCP (ABI >= 4) and the network namespace has no route
	 * to our loopback anyway */
	expect(SB_COMPILE, 0, KG_SB_LAYER_SECCOMP, ARGS("connect", port), KG_SB_END_EXIT,
	       "RESULT connect EACCES|RESULT connect ENETUNREACH");
	expect(SB_COMPILE, 0, KG_SB_LAYER_SECCOMP | KG_SB_LAYER_LANDLOCK, ARGS("connect", port),
	       KG_SB_END_EXIT, "RESULT connect ENETUNREACH");
	/* and without either, Landlock (ABI >= 4) refuses TCP connects */
	const char *argv[] = {SB_HELPER_INSIDE, "connect", port, NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	s.disabled = KG_SB_LAYER_SECCOMP | KG_SB_LAYER_NETNS;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1u);
	if ((r.o.layers_active & KG_SB_LAYER_LANDLOCK) && abi >= 4)
		assert_string_equal(r.out, "RESULT connect EACCES\n");
	sb_run_free(&r);
	close(lfd);
}

static void test_so_constructor_denied(void **state)
{
	(void)state;
	if (access("/usr/bin/cc", X_OK))
		skip();
	struct sb_run r;
	compile("evil.c", "evil.so", 0, &r);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_int_equal(r.o.exit_code, 0);
	sb_run_free(&r);
	/* the runner's way: apply the profile, then load the candidate; its constructor runs at
	 * load time and is caught like any other code */
	static const char *const argv[] = {SB_HELPER_INSIDE, "--apply", "run", "dlopen", "/cand/evil.so", NULL};
	struct kg_sb_path paths[2];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	paths[1] = (struct kg_sb_path){workdir, "/cand", KG_SB_PATH_EXEC};
	s.n_paths = 2;
	s.seccomp_deferred = 1;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_SYSCALL);
	assert_string_equal(r.o.syscall, "socket");
	sb_run_free(&r);
	/* and the .so loads fine when it behaves: the good one */
	static const char *const good[] = {SB_HELPER_INSIDE, "--apply", "run", "dlopen", "/cand/good.so", NULL};
	char so[PATH_MAX];
	snprintf(so, sizeof(so), "%s/good.so", workdir);
	if (!access(so, R_OK)) {
		s.argv = good;
		sb_run_spec(&s, &r);
		assert_int_equal(r.o.end, KG_SB_END_EXIT);
		assert_string_equal(r.out, "RESULT dlopen ok\n");
		sb_run_free(&r);
	}
}

static void test_kill_fallback_without_notify(void **state)
{
	(void)state;
	/* Where user notification is missing (kernel < 5.7) the filters kill: still a refusal,
	 * still a syscall end, only without the name. */
	setenv("KGATE_NO_SECCOMP_NOTIFY", "1", 1);
	expect(SB_RUN, 0, 0, ARGS("socket"), KG_SB_END_SYSCALL, NULL);
	expect(SB_COMPILE, 0, 0, ARGS("ptrace", "1"), KG_SB_END_SYSCALL, NULL);
	unsetenv("KGATE_NO_SECCOMP_NOTIFY");
	static const char *const argv[] = {SB_HELPER_INSIDE, "--apply", "run", "mount", NULL};
	static const char *const env[] = {"PATH=/bin", "KGATE_NO_SECCOMP_NOTIFY=1", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.seccomp_deferred = 1;
	s.envp = getenv("KGATE_SANITIZE") ? sb_test_env : env;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_SYSCALL);
	if (!getenv("KGATE_SANITIZE")) {
		assert_string_equal(r.o.syscall, "");
		assert_int_equal(r.o.syscall_nr, -1);
		assert_non_null(strstr(r.o.detail, "SIGSYS"));
	}
	sb_run_free(&r);
}

static void test_nvcc_compiles(void **state)
{
	(void)state;
	if (access("/usr/local/cuda/bin/nvcc", X_OK) || access("/usr/bin/g++", X_OK))
		skip();
	assert_int_equal(write_text(workdir, "k.cu",
				    "__global__ void add(float *a, const float *b, int n)\n"
				    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }\n"
				    "extern \"C\" int kg_forward(float *a, const float *b, int n)\n"
				    "{ add<<<(n + 255) / 256, 256>>>(a, b, n); return 0; }\n",
				    0644),
			 0);
	kg_error e = {0};
	assert_int_equal(kg_sb_chown_scratch(workdir, &e), 0);
	static const char *const argv[] = {"/usr/local/cuda/bin/nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC",
		"k.cu", "-o", "k.so", NULL};
	static const char *const env[] = {"PATH=/usr/local/cuda/bin:/usr/bin:/bin", "HOME=/tmp", NULL};
	struct kg_sb_path paths[2];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	paths[1] = (struct kg_sb_path){workdir, "/work", KG_SB_PATH_RW};
	s.n_paths = 2;
	s.cwd = "/work";
	s.envp = env;
	s.limits.wall_s = 120;
	sb_run_spec(&s, &r);
	if (r.o.end != KG_SB_END_EXIT || r.o.exit_code)
		fail_msg("nvcc failed: %s %s\n%s", r.o.syscall, r.o.detail, r.out);
	char so[PATH_MAX];
	snprintf(so, sizeof(so), "%s/k.so", workdir);
	assert_int_equal(access(so, R_OK), 0);
	sb_run_free(&r);
}

int main(void)
{
	snprintf(parent_pid, sizeof(parent_pid), "%d", (int)getpid());
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_files_out_of_reach),
		cmocka_unit_test(test_no_network),
		cmocka_unit_test(test_no_exec_in_run_profiles),
		cmocka_unit_test(test_xcomp_permission_asked),
		cmocka_unit_test(test_no_fork_in_run),
		cmocka_unit_test(test_tool_socket_only_when_named),
		cmocka_unit_test(test_no_ptrace_no_peeking),
		cmocka_unit_test(test_no_killing_others),
		cmocka_unit_test(test_no_mount_no_setuid),
		cmocka_unit_test(test_no_raising_limits),
		cmocka_unit_test(test_writes_stay_in_scratch),
		cmocka_unit_test(test_fork_bomb),
		cmocka_unit_test(test_infinite_loop),
		cmocka_unit_test(test_huge_malloc),
		cmocka_unit_test(test_compile_works),
		cmocka_unit_test(test_compile_cannot_read_host_files),
		cmocka_unit_test(test_compile_no_network),
		cmocka_unit_test(test_so_constructor_denied),
		cmocka_unit_test(test_kill_fallback_without_notify),
		cmocka_unit_test(test_nvcc_compiles),
	};
	return cmocka_run_group_tests(tests, setup_workdir, teardown_workdir);
}
