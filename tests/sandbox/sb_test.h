/* Shared pieces of the sandbox tests: locating the try-syscall helper, building a spec that makes
 * it visible inside (plain, or driver-like: what a GPU driver needs, as data), and running a spec
 * to its end with the output kept. */
#ifndef KG_SB_TEST_H
#define KG_SB_TEST_H

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

#define SB_HELPERS_INSIDE "/kgate/helpers"
#define SB_HELPER_INSIDE SB_HELPERS_INSIDE "/try-syscall"

struct sb_run {
	int rc;
	kg_error e;
	struct kg_sb_outcome o;
	char *out; /* copy of o.output */
	double spawn_ms;
};

/* The test binaries live in BUILD/tests/bin, the helper in BUILD/tests/helpers. */
static inline const char *sb_helpers_host(void)
{
	static char dir[PATH_MAX];
	if (dir[0])
		return dir;
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0'; /* BUILD/tests/bin */
	if ((slash = strrchr(self, '/')))
		*slash = '\0'; /* BUILD/tests */
	snprintf(dir, sizeof(dir), "%s/helpers", self);
	return dir;
}

static inline const char *sb_helper_host(void)
{
	static char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/try-syscall", sb_helpers_host());
	return path;
}

/* Programs under test run with a minimal environment; sanitizer builds of the helper must not
 * start LeakSanitizer (it ptraces), touch RLIMIT_CORE (a run profile denies setting limits), or
 * turn the crashes and failed allocations the tests expect into reports of their own. */
static const char *const sb_test_env[] = {
	"PATH=/usr/bin:/bin",
	"LC_ALL=C",
	"ASAN_OPTIONS=detect_leaks=0:disable_coredump=0:abort_on_error=0:handle_segv=0:"
	"allocator_may_return_null=1",
	"UBSAN_OPTIONS=print_stacktrace=0",
	NULL,
};

/* What a GPU driver needs beyond the run profile, as the verifier's CUDA backend describes it: data
 * in the spec, never a profile of its own. */
static const char *const sb_driver_devices[] = {"/dev/nvidia*", NULL};
static const char *const sb_driver_syscalls[] = {"epoll_wait", "epoll_pwait", "epoll_ctl", "select", "pselect6",
	"sched_getparam", "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min", NULL};

enum sb_kind { SB_COMPILE, SB_RUN, SB_DRIVER };

static inline const char *sb_kind_name(enum sb_kind k)
{
	return k == SB_COMPILE ? "compile" : k == SB_RUN ? "run" : "run-cuda";
}

static inline enum kg_sb_profile sb_kind_profile(enum sb_kind k)
{
	return k == SB_COMPILE ? KG_SB_PROFILE_COMPILE : KG_SB_PROFILE_RUN;
}

static inline void sb_driver_like(struct kg_sb_spec *s)
{
	s->name = "run-cuda";
	s->devices = sb_driver_devices;
	s->proc = KG_SB_PROC_RW;
	s->sys_ro = 1;
	s->syscalls = sb_driver_syscalls;
	s->readonly_opens = 1;
	/* the driver reserves terabytes of address space, and starts threads of its own */
	s->limits.address_space_unbounded = 1;
	s->limits.nproc = 128;
}

/* paths[0] becomes the helper directory; the caller may add more after it */
static inline void sb_spec(struct kg_sb_spec *s, struct kg_sb_path *paths, enum kg_sb_profile prof,
			   const char *const *argv)
{
	memset(s, 0, sizeof(*s));
	s->profile = prof;
	s->argv = argv;
	s->envp = sb_test_env;
	s->stdin_fd = -1;
	s->limits.wall_s = 20;
	paths[0] = (struct kg_sb_path){sb_helpers_host(), SB_HELPERS_INSIDE, KG_SB_PATH_EXEC};
	s->paths = paths;
	s->n_paths = 1;
}

static inline void sb_spec_kind(struct kg_sb_spec *s, struct kg_sb_path *paths, enum sb_kind k,
				const char *const *argv)
{
	sb_spec(s, paths, sb_kind_profile(k), argv);
	if (k == SB_DRIVER)
		sb_driver_like(s);
}

static inline void sb_run_spec(const struct kg_sb_spec *s, struct sb_run *r)
{
	struct kg_sb_child *c = NULL;
	memset(r, 0, sizeof(*r));
	uint64_t t0 = kg_now_ns();
	r->rc = kg_sb_spawn(s, &c, &r->e);
	r->spawn_ms = (double)(kg_now_ns() - t0) / 1e6;
	if (r->rc) {
		fprintf(stderr, "spawn: %d %s\n", r->rc, r->e.msg);
		return;
	}
	kg_sb_wait(c, &r->o);
	r->out = strdup(r->o.output ? r->o.output : "");
	char a[256], f[256];
	fprintf(stderr, "[%s %s] end=%s exit=%d signo=%d syscall=%s detail=%s wall=%.3fs\n  active=%s failed=%s notes=%s\n  output=%.300s\n",
		s->name ? s->name : kg_sb_profile_name(s->profile), s->argv[1] ? s->argv[1] : "",
		kg_sb_end_name(r->o.end), r->o.exit_code, r->o.signo,
		r->o.syscall, r->o.detail, r->o.wall_s, kg_sb_layers_str(r->o.layers_active, a, sizeof(a)),
		kg_sb_layers_str(r->o.layers_failed, f, sizeof(f)), kg_sb_notes(c), r->out);
	r->o.output = r->out;
	kg_sb_free(c);
}

static inline void sb_run_free(struct sb_run *r)
{
	free(r->out);
	r->out = NULL;
}

/* Processes anywhere on the host whose command line holds marker (forks keep it). */
static inline int sb_count_procs(const char *marker)
{
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[300], buf[4096];
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t got = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < got; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[got > 0 ? got : 0] = '\0';
		if (strstr(buf, marker))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

#endif
