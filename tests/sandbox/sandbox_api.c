/* Unit tests of the sandbox API: spawn and exit codes, output capture and its bounds, the watchdog
 * on a process tree, fd hand-over, required layers, kill/wait/free, and the layers this host gives.
 * libuv-style: one process, each case spawns its own children and leaves none behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sb_test.h"
#include "sandbox/sb_int.h"

static void test_names(void **state)
{
	(void)state;
	/* one word per end, stable: logs and tests name them */
	static const char *const ends[] = {"running", "exit", "signal", "timeout", "syscall", "memory",
		"output_limit", "setup", "killed"};
	for (int i = KG_SB_END_RUNNING; i <= KG_SB_END_KILLED; i++)
		assert_string_equal(kg_sb_end_name((enum kg_sb_end)i), ends[i]);
	assert_string_equal(kg_sb_end_name((enum kg_sb_end)99), "?");
	enum kg_sb_profile p;
	assert_int_equal(kg_sb_profile_parse("run", &p), 0);
	assert_int_equal(p, KG_SB_PROFILE_RUN);
	assert_string_equal(kg_sb_profile_name(p), "run");
	assert_int_equal(kg_sb_profile_parse("compile", &p), 0);
	assert_int_equal(p, KG_SB_PROFILE_COMPILE);
	/* a driver is data in a run spec, not a profile */
	assert_int_not_equal(kg_sb_profile_parse("run-cuda", &p), 0);
	assert_int_not_equal(kg_sb_profile_parse("run-cpu", &p), 0);
	assert_int_not_equal(kg_sb_profile_parse("gpu", &p), 0);
	char buf[256];
	unsigned all = (1u << KG_SB_LAYER_COUNT_) - 1;
	kg_sb_layers_str(all, buf, sizeof(buf));
	assert_string_equal(buf, "userns,mountns,pidns,netns,ipcns,utsns,no_new_privs,caps,rlimits,cgroup,"
				 "landlock,seccomp,mseal");
	for (unsigned i = 0; i < KG_SB_LAYER_COUNT_; i++)
		assert_int_equal(kg_sb_layer_parse(kg_sb_layer_name(1u << i)), 1u << i);
	assert_int_equal(kg_sb_layer_parse("selinux"), 0);
}

/* kg_sb_seal_memory: the page turns read-only, and where the mseal layer is asked for (the
 * spawner's KGATE_SB_MSEAL=1) not even the process itself can make it writable again. */
static void test_seal_memory(void **state)
{
	(void)state;
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	p[0] = 1;
	kg_error e = {0};
	setenv(KG_SB_ENV_MSEAL, "1", 1);
	int rc = kg_sb_seal_memory(p, 1, PROT_READ, &e);
	unsetenv(KG_SB_ENV_MSEAL);
	if (rc == -ENOSYS || rc == -EINVAL) {
		munmap(p, (size_t)pg);
		skip(); /* no mseal(2) here: the layer reports itself unavailable */
	}
	assert_int_equal(rc, 0);
	assert_int_equal(p[0], 1);
	assert_int_equal(mprotect(p, (size_t)pg, PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(munmap(p, (size_t)pg), -1);
}

static void test_true_and_layers(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/true", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_int_equal(r.o.exit_code, 0);
	/* every layer was either brought up or reported as failed, never silently skipped */
	unsigned all = (1u << KG_SB_LAYER_COUNT_) - 1;
	assert_int_equal(r.o.layers_active | r.o.layers_failed, all);
	assert_int_equal(r.o.layers_active & r.o.layers_failed, 0);
	/* these need no kernel feature beyond what kgate requires */
	unsigned basic = KG_SB_LAYER_NO_NEW_PRIVS | KG_SB_LAYER_CAPS | KG_SB_LAYER_RLIMITS | KG_SB_LAYER_SECCOMP;
	assert_int_equal(r.o.layers_active & basic, basic);
	if (geteuid() == 0) /* root can always create namespaces */
		assert_true(r.o.layers_active & KG_SB_LAYER_PIDNS);
	assert_true(r.o.wall_s > 0 && r.o.wall_s < 10);
	sb_run_free(&r);
}

/* Regression (seen on the GPU host): the child shares kgate's address space until execve, so an
 * address-space bound set early made every later mapping fail ("seccomp mapping the filter:
 * Cannot allocate memory") whenever kgate itself held more than the bound (gigabyte tensors). */
static void test_big_parent_small_bound(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/sh", "-c", "exit 5", NULL};
	size_t big = 6ull << 30;
	void *hold = mmap(NULL, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	assert_true(hold != MAP_FAILED);
	for (int prof = KG_SB_PROFILE_COMPILE; prof <= KG_SB_PROFILE_RUN; prof++) {
		struct kg_sb_path paths[1];
		struct kg_sb_spec s;
		struct sb_run r;
		sb_spec(&s, paths, (enum kg_sb_profile)prof, argv);
		s.limits.mem_bytes = 1ull << 30;
		sb_run_spec(&s, &r);
		if (r.rc)
			fail_msg("profile %d: spawn failed: %s", prof, r.e.msg);
		assert_int_equal(r.o.end, KG_SB_END_EXIT);
		assert_int_equal(r.o.exit_code, 5);
		sb_run_free(&r);
	}
	munmap(hold, big);
}

/* An interpreter reserves far more address space than it uses (no RLIMIT_AS), but what it writes
 * is bounded: data_bounded sets RLIMIT_DATA to mem_bytes (red team: a torch candidate held 6 GiB
 * under a 4 GiB policy); without it, nothing. The shell reports the limits it was given, in KiB. */
static void test_data_bounded(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/sh", "-c", "ulimit -d; ulimit -v", NULL};
	for (int bounded = 0; bounded <= 1; bounded++) {
		struct kg_sb_path paths[1];
		struct kg_sb_spec s;
		struct sb_run r;
		sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
		s.limits.mem_bytes = 1ull << 30;
		s.limits.address_space_unbounded = 1;
		s.limits.data_bounded = bounded;
		sb_run_spec(&s, &r);
		if (r.rc)
			fail_msg("spawn failed: %s", r.e.msg);
		assert_int_equal(r.o.end, KG_SB_END_EXIT);
		/* a sanitizer build's programs go unbounded (ASan's shadow), this one too */
		int want = bounded && !getenv("KGATE_SANITIZE");
		assert_string_equal(r.out, want ? "1048576\nunlimited\n" : "unlimited\nunlimited\n");
		sb_run_free(&r);
	}
}

/* Memory bounded as a whole (red team: a torch candidate held 5 GiB in five shared anonymous
 * mappings under a 4 GiB policy, which RLIMIT_DATA does not count). Where no cgroup's memory.max
 * bounds the tree the supervisor counts it: private pages, and each shared-memory object once
 * (shared anonymous, /dev/zero mapped shared, memfds mapped or only held open), a shared object at
 * the most it held even after its mapping was trimmed. The holder keeps MiB in 16 MiB mappings, so
 * that no single mmap is over the bound: only the sum is. */
static const char *const hold_extras[] = {"memfd_create", "ftruncate", NULL};

static void hold_run(enum kg_sb_profile prof, const char *kind, unsigned mib, unsigned secs, unsigned disabled,
		     struct sb_run *r)
{
	char action[32], size[16], hold_s[16];
	snprintf(action, sizeof(action), "hold-%s", kind);
	snprintf(size, sizeof(size), "%u", mib);
	snprintf(hold_s, sizeof(hold_s), "%u", secs);
	const char *argv[] = {SB_HELPER_INSIDE, action, size, hold_s, NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, prof, argv);
	s.limits.mem_bytes = 64ull << 20;
	s.limits.address_space_unbounded = 1; /* the count alone, as for an interpreter or a GPU driver */
	s.syscalls = hold_extras;
	s.disabled = disabled;
	sb_run_spec(&s, r);
	if (r->rc)
		fail_msg("hold-%s: spawn failed: %s", kind, r->e.msg);
}

static void test_memory_whole(void **state)
{
	(void)state;
	int sanitize = getenv("KGATE_SANITIZE") != NULL;
	static const char *const over[] = {"private", "shared", "zero", "trim", "memfd", "memfd-fd"};
	/* the supervisor's count (no cgroup), and whatever this host gives (a cgroup, or the count) */
	for (int cg = 0; cg <= 1; cg++) {
		for (size_t i = 0; i < KG_ARRAY_LEN(over); i++) {
			struct sb_run r;
			hold_run(KG_SB_PROFILE_RUN, over[i], 128, 10, cg ? 0 : KG_SB_LAYER_CGROUP, &r);
			if (sanitize) { /* a sanitizer build's programs go unbounded (ASan's shadow), this one too */
				assert_int_equal(r.o.end, KG_SB_END_EXIT);
				sb_run_free(&r);
				continue;
			}
			if (r.o.end != KG_SB_END_MEMORY)
				fail_msg("hold-%s 128 MiB under 64 MiB: ended %s (%s)", over[i], kg_sb_end_name(r.o.end),
					 r.o.detail);
			if (!(r.o.layers_active & KG_SB_LAYER_CGROUP)) {
				assert_non_null(strstr(r.o.detail, "over the limit of 64 MiB"));
				assert_true(r.o.mem_peak > 64ull << 20);
			}
			/* ended as soon as it was over, not at the end of its hold */
			assert_true(r.o.wall_s < 8);
			sb_run_free(&r);
		}
	}
}

/* Whether this process may read /proc/PID/map_files (CAP_SYS_ADMIN in the initial namespace). */
static int map_files_readable(void)
{
	char line[256], path[320];
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			fclose(f);
		return 0;
	}
	fclose(f);
	line[strcspn(line, " ")] = '\0';
	snprintf(path, sizeof(path), "/proc/self/map_files/%s", line);
	struct stat st;
	return !stat(path, &st);
}

/* The same without seccomp notifications (kernels without them): nothing reaches the supervisor
 * before a shared mmap runs, and the count finds the objects in the tree's mappings and fds. A
 * trimmed mapping's pages are then seen only where the supervisor may read the object's size
 * through /proc/PID/map_files (root). */
static void test_memory_sampled_only(void **state)
{
	(void)state;
	if (getenv("KGATE_SANITIZE"))
		skip();
	setenv("KGATE_NO_SECCOMP_NOTIFY", "1", 1);
	const char *over[] = {"private", "shared", "zero", "memfd", "memfd-fd", "trim"};
	size_t n = KG_ARRAY_LEN(over) - !map_files_readable();
	for (size_t i = 0; i < n; i++) {
		struct sb_run r;
		hold_run(KG_SB_PROFILE_RUN, over[i], 128, 10, KG_SB_LAYER_CGROUP, &r);
		if (r.o.end != KG_SB_END_MEMORY)
			fail_msg("hold-%s without notifications: ended %s (%s)", over[i], kg_sb_end_name(r.o.end),
				 r.o.detail);
		assert_non_null(strstr(r.o.detail, "its processes held"));
		sb_run_free(&r);
	}
	unsetenv("KGATE_NO_SECCOMP_NOTIFY");
}

/* Under the bound each holder lives; a shared object two processes map counts once (40 MiB held by
 * a parent and its child is 40 MiB, not 80). */
static void test_memory_under_bound(void **state)
{
	(void)state;
	static const struct {
		enum kg_sb_profile prof;
		const char *kind;
		unsigned mib;
	} cases[] = {
		{KG_SB_PROFILE_RUN, "private", 24},
		{KG_SB_PROFILE_RUN, "shared", 24},
		{KG_SB_PROFILE_RUN, "memfd-fd", 24},
		{KG_SB_PROFILE_COMPILE, "fork", 40},
	};
	for (size_t i = 0; i < KG_ARRAY_LEN(cases); i++) {
		struct sb_run r;
		hold_run(cases[i].prof, cases[i].kind, cases[i].mib, 1, KG_SB_LAYER_CGROUP, &r);
		if (r.o.end != KG_SB_END_EXIT)
			fail_msg("hold-%s %u MiB under 64 MiB: ended %s (%s)", cases[i].kind, cases[i].mib,
				 kg_sb_end_name(r.o.end), r.o.detail);
		assert_int_equal(r.o.exit_code, 0);
		assert_string_equal(r.out, "RESULT hold ok\n");
		if (!getenv("KGATE_SANITIZE")) {
			/* counted: at least what it held, and the shared pages once */
			if (r.o.mem_peak < (uint64_t)cases[i].mib << 20 || r.o.mem_peak > 64ull << 20)
				fail_msg("hold-%s %u MiB: counted %llu bytes", cases[i].kind, cases[i].mib,
					 (unsigned long long)r.o.mem_peak);
		}
		sb_run_free(&r);
	}
}

static void test_exit_code(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/sh", "-c", "exit 7", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_int_equal(r.o.exit_code, 7);
	assert_string_equal(kg_sb_end_name(r.o.end), "exit");
	sb_run_free(&r);
}

static void test_output_both_streams(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_string_equal(r.out, "to-stdout\nto-stderr\n");
	assert_int_equal(r.o.output_len, strlen(r.out));
	assert_int_equal(r.o.output_total, r.o.output_len);
	sb_run_free(&r);
}

static void test_output_truncated(void **state)
{
	(void)state;
	static const char *const argv[] = {SB_HELPER_INSIDE, "print", "100000", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.limits.output_keep = 1000;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_int_equal(r.o.exit_code, 0);
	assert_int_equal(r.o.output_len, 1000);
	assert_int_equal(strlen(r.out), 1000);
	assert_int_equal(r.o.output_total, 100000);
	sb_run_free(&r);
}

static void test_output_flood_killed(void **state)
{
	(void)state;
	static const char *const argv[] = {SB_HELPER_INSIDE, "flood", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.limits.output_keep = 4096;
	s.limits.output_max = 8 << 20;
	s.limits.wall_s = 30;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_OUTPUT_LIMIT);
	assert_string_equal(kg_sb_end_name(r.o.end), "output_limit");
	assert_int_equal(r.o.output_len, 4096);
	assert_true(r.o.output_total > (8u << 20));
	/* bounded by the output limit, not by the wall clock: it costs next to nothing */
	assert_true(r.o.wall_s < 5);
	sb_run_free(&r);
}

static void timeout_tree(unsigned disabled)
{
	/* a forked grandchild in the background and one in the foreground */
	static const char *const argv[] = {"/bin/sh", "-c", "sleep 1007.25 & sleep 1007.25; wait", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	s.limits.wall_s = 0.7;
	s.disabled = disabled;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_TIMEOUT);
	assert_string_equal(kg_sb_end_name(r.o.end), "timeout");
	assert_true(r.o.wall_s >= 0.6 && r.o.wall_s < 5);
	/* the whole tree is gone once the outcome is there (reaping races, so allow a moment) */
	int left = 1;
	for (int i = 0; i < 100 && (left = sb_count_procs("sleep 1007.25")); i++)
		usleep(10000);
	assert_int_equal(left, 0);
	sb_run_free(&r);
}

static void test_timeout_kills_tree(void **state)
{
	(void)state;
	timeout_tree(0);
}

static void test_timeout_kills_tree_without_pidns(void **state)
{
	(void)state;
	/* no pid namespace: the process group carries the kill */
	timeout_tree(KG_SB_LAYER_PIDNS);
}

/* The spawner is killed outright (SIGKILL: no handler, no supervisor), the sandbox's program runs
 * on: it must die with it. The kernel clears the parent-death signal when the effective ids change,
 * and a root caller's sandbox changes them (uid 0 of the user namespace is 65534 outside; without
 * one, 65534 itself); before the init re-armed it, init and its program outlived the spawner. */
/* Our children by /proc: the sandbox's processes that the killed spawner left to us. */
static int kill_our_children(void)
{
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[300], buf[512];
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		const char *rp = strrchr(buf, ')');
		char st;
		int ppid;
		if (rp && sscanf(rp + 1, " %c %d", &st, &ppid) == 2 && ppid == getpid()) {
			kill(atoi(de->d_name), SIGKILL);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

static void dies_with_spawner(unsigned disabled, const char *secs)
{
	/* each case sleeps its own length, so one case's leftover cannot fail the next */
	const char *const argv[] = {SB_HELPER_INSIDE, "sleep", secs, NULL};
	char marker[64];
	snprintf(marker, sizeof(marker), "try-syscall sleep %s", secs);
	int up[2];
	assert_int_equal(pipe(up), 0);
	/* What the spawner leaves comes to us, not to the host's init: we reap it (a zombie of uid
	 * 65534 counts against every later sandbox's RLIMIT_NPROC until someone does), and we can
	 * tell when nothing is left. */
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	pid_t spawner = fork();
	assert_true(spawner >= 0);
	if (spawner == 0) {
		close(up[0]);
		struct kg_sb_path paths[1];
		struct kg_sb_spec s;
		struct kg_sb_child *c = NULL;
		kg_error e = {0};
		sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
		s.limits.wall_s = 60;
		/* RLIMIT_NPROC counts every process of the uid: as root, every other sandbox on
		 * the host runs as 65534 too, and the run profile's bound of 1 would refuse pid 2 */
		s.limits.nproc = 256;
		s.disabled = disabled;
		char ok = kg_sb_spawn(&s, &c, &e) ? 'n' : 'y';
		if (ok != 'y')
			fprintf(stderr, "spawn: %s\n", e.msg);
		if (write(up[1], &ok, 1) != 1 || ok != 'y')
			_exit(1);
		for (;;)
			pause();
	}
	close(up[1]);
	char ok = 0;
	ssize_t got = read(up[0], &ok, 1);
	close(up[0]);
	/* spawn returns once the program is about to execve: its command line shows a moment later */
	int running = 0;
	for (int i = 0; i < 500 && got == 1 && ok == 'y' && !(running = sb_count_procs(marker)); i++)
		usleep(10000);
	kill(spawner, SIGKILL);
	int spawner_reaped = waitpid(spawner, NULL, 0) == spawner;
	/* the kernel's kill is asynchronous: a bounded wait until every orphan has ended and been
	 * reaped (ECHILD), then nothing of it may be left */
	int orphans_gone = 0;
	for (int i = 0; i < 500 && !orphans_gone; i++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		orphans_gone = waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
		if (!orphans_gone)
			usleep(10000);
	}
	int left = sb_count_procs(marker);
	if (!orphans_gone) /* the failure below; what lives on is ours to end */
		while (kill_our_children() && waitpid(-1, NULL, 0) > 0)
			;
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	if (running != 1 || !orphans_gone || left)
		fprintf(stderr, "%s: running before the kill %d, orphans gone %d, left %d\n", marker, running,
			orphans_gone, left);
	assert_true(spawner_reaped);
	assert_int_equal(got, 1);
	assert_int_equal(ok, 'y');
	assert_int_equal(running, 1);
	assert_true(orphans_gone);
	assert_int_equal(left, 0);
}

static void test_dies_with_spawner(void **state)
{
	(void)state;
	dies_with_spawner(0, "97");
}

static void test_dies_with_spawner_without_userns(void **state)
{
	(void)state;
	dies_with_spawner(KG_SB_LAYER_USERNS, "98");
}

static void test_dies_with_spawner_without_pidns(void **state)
{
	(void)state;
	dies_with_spawner(KG_SB_LAYER_PIDNS, "99");
}

static void test_fds_closed_but_handed(void **state)
{
	(void)state;
	static const char *const argv[] = {SB_HELPER_INSIDE, "fds", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	int leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC: must not get in anyway */
	int p1[2], p2[2];
	assert_true(leak >= 0);
	assert_int_equal(pipe(p1), 0);
	assert_int_equal(pipe(p2), 0);
	int handed[] = {p2[1], p1[1]};
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.fds = handed;
	s.n_fds = 2;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_string_equal(r.out, "FDS 0 1 2 3 4\n");
	sb_run_free(&r);

	/* deferred: the notify socket follows the handed fds, and the program is told where */
	s.seccomp_deferred = 1;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, "FDS 0 1 2 3 4 5\n");
	sb_run_free(&r);
	static const char *const argv_env[] = {"/bin/sh", "-c", "echo $KGATE_SB_NOTIFY_FD $KGATE_SB_NFDS", NULL};
	s.argv = argv_env;
	s.profile = KG_SB_PROFILE_COMPILE;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, "5 2\n");
	sb_run_free(&r);
	close(leak);
	close(p1[0]), close(p1[1]), close(p2[0]), close(p2[1]);
}

static void test_wait_fd_on_handed_fd(void **state)
{
	(void)state;
	static const char *const argv[] = {SB_HELPER_INSIDE, "write-fd", "3", "hello", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	int sp[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.fds = &sp[1];
	s.n_fds = 1;
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), 0);
	close(sp[1]);
	assert_int_equal(kg_sb_wait_fd(c, sp[0], 10000), 1);
	char buf[16] = "";
	assert_int_equal(read(sp[0], buf, sizeof(buf) - 1), 5);
	assert_string_equal(buf, "hello");
	/* nothing more to read (EOF); wait for the end alone */
	int r;
	while ((r = kg_sb_wait_fd(c, -1, 10000)) == 0)
		;
	assert_int_equal(r, KG_SB_ENDED);
	struct kg_sb_outcome o;
	assert_int_equal(kg_sb_wait(c, &o), 0);
	assert_int_equal(o.end, KG_SB_END_EXIT);
	assert_int_equal(o.exit_code, 0);
	/* and safe to call twice */
	struct kg_sb_outcome o2;
	assert_int_equal(kg_sb_wait(c, &o2), 0);
	assert_int_equal(o2.end, o.end);
	assert_int_equal(o2.exit_code, o.exit_code);
	kg_sb_free(c);
	close(sp[0]);
}

static void test_wait_fd_timeout(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/sleep", "100", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), 0);
	uint64_t t0 = kg_now_ns();
	assert_int_equal(kg_sb_wait_fd(c, -1, 100), 0);
	double ms = (double)(kg_now_ns() - t0) / 1e6;
	assert_true(ms >= 90 && ms < 2000);
	kg_sb_kill(c, KG_SB_END_TIMEOUT);
	struct kg_sb_outcome o;
	kg_sb_wait(c, &o);
	assert_int_equal(o.end, KG_SB_END_TIMEOUT);
	kg_sb_free(c);
}

static void test_kill_and_free(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/sleep", "100", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), 0);
	assert_true(kg_sb_pid(c) > 0);
	kg_sb_kill(c, KG_SB_END_KILLED);
	struct kg_sb_outcome o;
	kg_sb_wait(c, &o);
	assert_int_equal(o.end, KG_SB_END_KILLED);
	assert_string_equal(kg_sb_end_name(o.end), "killed");
	kg_sb_free(c);

	/* freeing a running child kills and reaps it: no zombie is left to us */
	assert_int_equal(kg_sb_spawn(&s, &c, &e), 0);
	kg_sb_free(c);
	kg_sb_free(NULL);
	errno = 0;
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void test_crash_names_signal(void **state)
{
	(void)state;
	static const char *const segv[] = {SB_HELPER_INSIDE, "segv", NULL};
	static const char *const abrt[] = {SB_HELPER_INSIDE, "abort", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, segv);
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_SIGNAL);
	assert_int_equal(r.o.signo, SIGSEGV);
	assert_string_equal(r.o.detail, "SIGSEGV");
	assert_string_equal(kg_sb_end_name(r.o.end), "signal");
	sb_run_free(&r);
	/* the program is pid 2: its own SIGABRT is not swallowed as it would be for an init */
	s.argv = abrt;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_SIGNAL);
	assert_string_equal(r.o.detail, "SIGABRT");
	sb_run_free(&r);
}

static void test_required_layer_disabled(void **state)
{
	(void)state;
	static const char *const argv[] = {"/bin/true", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.required = KG_SB_LAYER_LANDLOCK | KG_SB_LAYER_SECCOMP;
	s.disabled = KG_SB_LAYER_LANDLOCK;
	struct kg_sb_child *c = (struct kg_sb_child *)&s; /* must be reset */
	kg_error e = {0};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EPERM);
	assert_null(c);
	assert_non_null(strstr(e.msg, "landlock"));
}

static void test_required_layer_failing(void **state)
{
	(void)state;
	/* The cgroup layer comes up only where a writable cgroup2 tree with memory and pids exists:
	 * requiring it either works or fails the spawn naming it, never runs without it. */
	static const char *const argv[] = {"/bin/true", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.required = KG_SB_LAYER_CGROUP;
	sb_run_spec(&s, &r);
	if (r.rc) {
		assert_int_equal(r.rc, -EPERM);
		assert_non_null(strstr(r.e.msg, "cgroup"));
	} else {
		assert_true(r.o.layers_active & KG_SB_LAYER_CGROUP);
	}
	sb_run_free(&r);
}

static void test_missing_program(void **state)
{
	(void)state;
	static const char *const argv[] = {"/usr/bin/kgate-no-such-program", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	sb_spec(&s, paths, KG_SB_PROFILE_COMPILE, argv);
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -ENOENT);
	assert_null(c);
	assert_non_null(strstr(e.msg, "execve"));
	static const char *const rel[] = {"true", NULL};
	s.argv = rel;
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EINVAL);
	/* a missing required path is a setup error naming it */
	s.argv = argv;
	struct kg_sb_path more[2] = {paths[0], {"/nonexistent/kgate", "/x", 0}};
	s.paths = more;
	s.n_paths = 2;
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "/nonexistent/kgate"));
	more[1].flags = KG_SB_PATH_OPTIONAL;
	s.argv = (const char *const[]){"/bin/true", NULL};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), 0);
	kg_sb_free(c);
}

static void test_identity(void **state)
{
	(void)state;
	static const char *const argv[] = {SB_HELPER_INSIDE, "id", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	if (r.o.layers_active & KG_SB_LAYER_USERNS)
		assert_non_null(strstr(r.out, "uid=0 gid=0"));
	if (r.o.layers_active & KG_SB_LAYER_PIDNS)
		assert_non_null(strstr(r.out, "pid=2 ppid=1"));
	sb_run_free(&r);
	if (geteuid() != 0)
		return;
	/* root without a user namespace: nobody, not root with dropped capabilities */
	s.disabled = KG_SB_LAYER_USERNS;
	sb_run_spec(&s, &r);
	assert_int_equal(r.o.end, KG_SB_END_EXIT);
	assert_non_null(strstr(r.out, "uid=65534 gid=65534"));
	sb_run_free(&r);
}

/* Whether uid 65534 may execute path (every directory above it searchable): what a root caller's
 * sandbox runs as, where no mount namespace shows the helper elsewhere. */
static int nobody_can_exec(const char *path)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(setgroups(0, NULL) || setgid(65534) || setuid(65534) || access(path, X_OK) ? 1 : 0);
	int st = 1;
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_landlock_fallback_without_mountns(void **state)
{
	(void)state;
	/* as root the program runs as 65534, at the helper's own path: a tree under /root (0700 on a
	 * fresh Debian) is out of its reach, and the case cannot be made there */
	if (geteuid() == 0 && !nobody_can_exec(sb_helper_host())) {
		fprintf(stderr, "skip: uid 65534 cannot reach %s (a directory above it is closed)\n",
			sb_helper_host());
		skip();
	}
	/* without the mount namespace, Landlock alone keeps the host's files out */
	const char *argv[] = {sb_helper_host(), "open", "/etc/shadow", NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	struct sb_run r;
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	paths[0].inside = NULL; /* cannot be moved without a mount namespace */
	s.disabled = KG_SB_LAYER_MOUNTNS;
	sb_run_spec(&s, &r);
	assert_int_equal(r.rc, 0);
	if (!(r.o.layers_active & KG_SB_LAYER_LANDLOCK)) {
		sb_run_free(&r);
		skip();
	}
	assert_false(r.o.layers_active & KG_SB_LAYER_MOUNTNS);
	assert_string_equal(r.out, "RESULT open EACCES\n");
	sb_run_free(&r);
	argv[1] = "create";
	argv[2] = "/usr/kgate-test";
	sb_run_spec(&s, &r);
	assert_string_equal(r.out, "RESULT create EACCES\n");
	sb_run_free(&r);
	/* a moved path needs the mount namespace: a setup error, not a silent exposure */
	paths[0].inside = SB_HELPERS_INSIDE;
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), -EPERM);
	assert_non_null(strstr(e.msg, "mount namespace"));
}

/* The process seen from outside: stopped (every thread), its threads listed, resumed. */
static void test_proc_stop(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		close(p[0]);
		for (;;) {
			if (write(p[1], "x", 1) != 1)
				_exit(0);
			usleep(1000);
		}
	}
	close(p[1]);
	struct kg_sb_process *pr = calloc(1, sizeof(*pr));
	kg_error e = {0};
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(kg_sb_proc_attach(pr, pid, &e), 0);
	assert_int_equal(kg_sb_proc_stop(pr, 3000, &e), 0);
	assert_true(pr->stopped);
	assert_int_equal(pr->n_tasks, 1);
	assert_int_equal(pr->tasks[0], pid);
	/* stopped means stopped: nothing more arrives (drain what was in flight first) */
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (read(p[0], &c, 1) == 1)
		;
	usleep(20000);
	assert_int_equal(read(p[0], &c, 1), -1);
	assert_int_equal(kg_sb_proc_outer_tid(pr, pid), pid); /* no pid namespace here: the same id */
	assert_int_equal(kg_sb_proc_cont(pr, &e), 0);
	fcntl(p[0], F_SETFL, 0);
	assert_int_equal(read(p[0], &c, 1), 1);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	/* a process gone is -ESRCH, not a hang */
	assert_int_equal(kg_sb_proc_stop(pr, 500, &e), -ESRCH);
	kg_sb_proc_detach(pr);
	free(pr);
	close(p[0]);
}

/* One watched program: spawned, its first word awaited (with its pid from the kernel), distrusted
 * (or not), told to go; its outcome returned. */
static void watched_run_spec(const char *what, int distrust, unsigned disabled, struct kg_sb_outcome *o, char *out,
			     size_t outsz);
static void watched_run(const char *what, int distrust, struct kg_sb_outcome *o, char *out, size_t outsz)
{
	watched_run_spec(what, distrust, 0, o, out, outsz);
}

static void watched_run_spec(const char *what, int distrust, unsigned disabled, struct kg_sb_outcome *o, char *out,
			     size_t outsz)
{
	const char *argv[] = {SB_HELPER_INSIDE, "--apply", "run", "watched", what, NULL};
	struct kg_sb_path paths[1];
	struct kg_sb_spec s;
	int sp[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	int one = 1;
	setsockopt(sp[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	sb_spec(&s, paths, KG_SB_PROFILE_RUN, argv);
	s.fds = &sp[1];
	s.n_fds = 1;
	s.seccomp_deferred = 1;
	s.watched = 1;
	s.disabled = disabled;
	struct kg_sb_child *c = NULL;
	kg_error e = {0};
	assert_int_equal(kg_sb_spawn(&s, &c, &e), 0);
	close(sp[1]);
	assert_int_equal(kg_sb_wait_fd(c, sp[0], 10000), 1);
	char buf;
	struct iovec iov = {.iov_base = &buf, .iov_len = 1};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(struct ucred))];
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
	assert_int_equal(recvmsg(sp[0], &mh, 0), 1);
	struct ucred uc = {0};
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_type == SCM_CREDENTIALS)
			memcpy(&uc, CMSG_DATA(h), sizeof(uc));
	assert_true(uc.pid > 0);
	if (distrust)
		assert_int_equal(kg_sb_distrust(c, uc.pid, &e), 0);
	assert_int_equal(write(sp[0], "g", 1), 1);
	assert_int_equal(kg_sb_wait(c, o), 0);
	snprintf(out, outsz, "%s", o->output ? o->output : "");
	kg_sb_free(c);
	close(sp[0]);
}

/* A watched program is free until it is distrusted; then a filter stacked and a change to a
 * sealed range are refused and named (KG_SB_END_TAMPER), while unsealed memory stays its own. */
static void test_watched_distrust(void **state)
{
	(void)state;
	if (sb_mseal_probe() || !sb_notify_supported())
		skip();
	struct kg_sb_outcome o;
	char out[512];
	watched_run("seccomp", 0, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_EXIT);
	assert_string_equal(out, "RESULT watched ok\n");
	watched_run("seccomp", 1, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_TAMPER);
	assert_non_null(strstr(o.detail, "seccomp"));
	watched_run("mprotect", 1, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_TAMPER);
	assert_non_null(strstr(o.detail, "mprotect"));
	assert_non_null(strstr(o.detail, "sealed range"));
	watched_run("munmap", 1, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_TAMPER);
	/* before the distrust the kernel's own EPERM (mseal) is all: nothing is named */
	watched_run("munmap", 0, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_EXIT);
	assert_string_equal(out, "RESULT watched EPERM\n");
	watched_run("mprotect-free", 1, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_EXIT);
	assert_string_equal(out, "RESULT watched ok\n");
	watched_run("munmap-free", 1, &o, out, sizeof(out));
	assert_string_equal(out, "RESULT watched ok\n");
	/* a hint changes nothing a sealed range holds; discarding its pages is the attempt */
	watched_run("madvise-hint", 1, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_EXIT);
	assert_string_equal(out, "RESULT watched ok\n");
	watched_run("madvise-dontneed", 1, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_TAMPER);
	assert_non_null(strstr(o.detail, "madvise"));
}

/* Without mseal (an older kernel), the program's read-only file mappings are guarded by the
 * supervisor alone: its own code's page cannot be made writable once it is distrusted. */
static void test_watched_without_mseal(void **state)
{
	(void)state;
	if (!sb_notify_supported())
		skip();
	struct kg_sb_outcome o;
	char out[512];
	watched_run_spec("mprotect-image", 0, KG_SB_LAYER_MSEAL, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_EXIT);
	assert_string_equal(out, "RESULT watched ok\n"); /* nothing sealed it, nobody distrusted it */
	watched_run_spec("mprotect-image", 1, KG_SB_LAYER_MSEAL, &o, out, sizeof(out));
	assert_int_equal(o.end, KG_SB_END_TAMPER);
	assert_non_null(strstr(o.detail, "mprotect"));
}

/* A watched program may install no handler for a fault signal (nor SIGCONT); others are fine. */
static void test_watched_signals(void **state)
{
	(void)state;
	if (!sb_notify_supported())
		skip();
	static const char *const segv[] = {SB_HELPER_INSIDE, "--apply", "run", "sigaction", "11", NULL};
	static const char *const cont[] = {SB_HELPER_INSIDE, "--apply", "run", "sigaction", "18", NULL};
	static const char *const usr1[] = {SB_HELPER_INSIDE, "--apply", "run", "sigaction", "10", NULL};
	const char *const *cases[] = {segv, cont, usr1};
	for (int i = 0; i < 3; i++) {
		struct kg_sb_path paths[1];
		struct kg_sb_spec s;
		struct sb_run r;
		sb_spec(&s, paths, KG_SB_PROFILE_RUN, cases[i]);
		s.seccomp_deferred = 1;
		s.watched = 1;
		sb_run_spec(&s, &r);
		assert_int_equal(r.rc, 0);
		if (i < 2) {
			assert_int_equal(r.o.end, KG_SB_END_SYSCALL);
			assert_string_equal(r.o.syscall, "rt_sigaction");
		} else {
			assert_int_equal(r.o.end, KG_SB_END_EXIT);
			assert_string_equal(r.out, "RESULT sigaction ok\n");
		}
		sb_run_free(&r);
	}
}

int main(void)
{
	if (!sb_helpers_host()) {
		fprintf(stderr, "cannot locate the test helpers\n");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_seal_memory),
		cmocka_unit_test(test_true_and_layers),
		cmocka_unit_test(test_data_bounded),
		cmocka_unit_test(test_memory_whole),
		cmocka_unit_test(test_memory_sampled_only),
		cmocka_unit_test(test_memory_under_bound),
		cmocka_unit_test(test_exit_code),
		cmocka_unit_test(test_big_parent_small_bound),
		cmocka_unit_test(test_output_both_streams),
		cmocka_unit_test(test_output_truncated),
		cmocka_unit_test(test_output_flood_killed),
		cmocka_unit_test(test_timeout_kills_tree),
		cmocka_unit_test(test_timeout_kills_tree_without_pidns),
		cmocka_unit_test(test_dies_with_spawner),
		cmocka_unit_test(test_dies_with_spawner_without_userns),
		cmocka_unit_test(test_dies_with_spawner_without_pidns),
		cmocka_unit_test(test_fds_closed_but_handed),
		cmocka_unit_test(test_wait_fd_on_handed_fd),
		cmocka_unit_test(test_wait_fd_timeout),
		cmocka_unit_test(test_kill_and_free),
		cmocka_unit_test(test_crash_names_signal),
		cmocka_unit_test(test_required_layer_disabled),
		cmocka_unit_test(test_required_layer_failing),
		cmocka_unit_test(test_missing_program),
		cmocka_unit_test(test_identity),
		cmocka_unit_test(test_landlock_fallback_without_mountns),
		cmocka_unit_test(test_proc_stop),
		cmocka_unit_test(test_watched_distrust),
		cmocka_unit_test(test_watched_signals),
		cmocka_unit_test(test_watched_without_mseal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
