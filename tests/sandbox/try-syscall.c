/* Helper for the sandbox tests, in the spirit of bubblewrap's tests/try-syscall.c: optionally applies
 * a filter itself (as the real runner does with seccomp_deferred), then performs one ACTION and
 * prints "RESULT ACTION ok" or "RESULT ACTION <ERRNO>" unless a denial killed it first. The filter
 * options are data on the command line; inside a sandbox its spec's description overrides them.
 * Usage: try-syscall [--apply compile|run] [--threads] [--mem BYTES] [--ro-opens] [--syscall NAME]...
 *                    [--ioctl-fd N] [--tool-socket[-allowed]] ACTION [ARG...] */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

static int result(const char *action, int rc)
{
	if (rc < 0) {
		const char *name = strerrorname_np(errno);
		printf("RESULT %s %s\n", action, name ? name : "?");
	} else {
		printf("RESULT %s ok\n", action);
	}
	return 0;
}

static pid_t pid_arg(const char *s)
{
	if (!strcmp(s, "parent"))
		return getppid();
	return (pid_t)strtol(s, NULL, 10);
}

static void *thread_main(void *arg)
{
	return arg;
}

static int tool_sock = -1;
/* "watched": two pages, the first sealed before the filter (as the runner seals its own) */
static unsigned char *sealed_page;

static int act(const char *a, int argc, char **argv)
{
	const char *x = argc > 0 ? argv[0] : "";
	const char *y = argc > 1 ? argv[1] : "";
	if (!strcmp(a, "true"))
		return 0;
	if (!strcmp(a, "exit"))
		exit(atoi(x));
	if (!strcmp(a, "print") || !strcmp(a, "flood")) {
		static char buf[65536];
		memset(buf, 'x', sizeof(buf));
		long long left = !strcmp(a, "flood") ? -1 : atoll(x);
		while (left) {
			size_t n = left < 0 || left > (long long)sizeof(buf) ? sizeof(buf) : (size_t)left;
			ssize_t w = write(1, buf, n);
			if (w <= 0)
				return 1;
			if (left > 0)
				left -= w;
		}
		return 0;
	}
	if (!strcmp(a, "stderr")) {
		fprintf(stderr, "%s\n", x);
		return 0;
	}
	if (!strcmp(a, "open")) {
		int fd = open(x, O_RDONLY);
		return result(a, fd);
	}
	if (!strcmp(a, "open-w")) {
		int fd = open(x, O_WRONLY);
		return result(a, fd);
	}
	if (!strcmp(a, "create")) {
		int fd = open(x, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0 && write(fd, "kgate\n", 6) != 6)
			fd = -1;
		return result(a, fd);
	}
	if (!strcmp(a, "socket"))
		return result(a, socket(AF_INET, SOCK_STREAM, 0));
	if (!strcmp(a, "connect")) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			return result(a, fd);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(x)),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		return result(a, connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
	}
	if (!strcmp(a, "execve")) {
		char *const args[] = {(char *)"/bin/true", NULL};
		execve("/bin/true", args, NULL);
		return result(a, -1);
	}
	if (!strcmp(a, "fork")) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		if (p > 0)
			waitpid(p, NULL, 0);
		return result(a, p);
	}
	if (!strcmp(a, "threads")) {
		pthread_t t;
		int rc = pthread_create(&t, NULL, thread_main, NULL);
		if (!rc)
			pthread_join(t, NULL);
		errno = rc;
		return result(a, rc ? -1 : 0);
	}
	if (!strcmp(a, "ptrace"))
		return result(a, (int)ptrace(PTRACE_ATTACH, pid_arg(x), 0, 0));
	if (!strcmp(a, "kill"))
		return result(a, kill(pid_arg(x), SIGKILL));
	if (!strcmp(a, "pvread")) {
		char buf[16];
		struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
		return result(a, (int)process_vm_readv(pid_arg(x), &local, 1, &remote, 1, 0));
	}
	if (!strcmp(a, "mount"))
		return result(a, mount("tmpfs", "/tmp", "tmpfs", 0, NULL));
	if (!strcmp(a, "setuid"))
		return result(a, setuid(1000));
	if (!strcmp(a, "rlimit")) {
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_max += 1000;
		rl.rlim_cur = rl.rlim_max;
		return result(a, setrlimit(RLIMIT_NOFILE, &rl));
	}
	if (!strcmp(a, "rlimit-as")) {
		struct rlimit rl;
		if (getrlimit(RLIMIT_AS, &rl))
			return result(a, -1);
		if (rl.rlim_max == RLIM_INFINITY)
			printf("RLIMIT_AS unlimited\n");
		else
			printf("RLIMIT_AS %llu\n", (unsigned long long)rl.rlim_max);
		return 0;
	}
	if (!strcmp(a, "select")) {
		/* the raw call, so that the filter sees "select" whatever libc prefers */
		struct timeval tv = {0, 0};
#ifdef SYS_select
		return result(a, (int)syscall(SYS_select, 0, NULL, NULL, NULL, &tv));
#else
		struct timespec ts = {0, 0};
		(void)tv;
		return result(a, (int)syscall(SYS_pselect6, 0, NULL, NULL, NULL, &ts, NULL));
#endif
	}
	if (!strcmp(a, "xcomp")) {
		/* oneDNN's question on an AMX CPU: which extended states may this process use (0x1022,
		 * ARCH_GET_XCOMP_PERM); any answer will do, being killed for asking will not */
		unsigned long long perm = 0;
		long rc = syscall(SYS_arch_prctl, 0x1022, &perm);
		return result(a, rc < 0 && errno == EINVAL ? 0 : (int)rc);
	}
	if (!strcmp(a, "prlimit")) {
		struct rlimit rl;
		getrlimit(RLIMIT_CPU, &rl);
		rl.rlim_max = rl.rlim_cur = RLIM_INFINITY;
		return result(a, prlimit(0, RLIMIT_CPU, &rl, NULL));
	}
	if (!strcmp(a, "forkbomb")) {
		for (;;)
			fork();
	}
	if (!strcmp(a, "loop")) {
		for (volatile unsigned long i = 0;; i++)
			;
	}
	if (!strcmp(a, "malloc")) {
		size_t gb = (size_t)atoll(x);
		char *p = malloc(gb << 30);
		if (p)
			memset(p, 1, 4096);
		printf("RESULT malloc %s\n", p ? "ok" : "ENOMEM");
		free(p);
		return 0;
	}
	if (!strcmp(a, "dlopen")) {
		void *h = dlopen(x, RTLD_NOW);
		printf("RESULT dlopen %s\n", h ? "ok" : dlerror());
		return 0;
	}
	if (!strcmp(a, "fds")) {
		printf("FDS");
		for (int fd = 0; fd < 1024; fd++)
			if (fcntl(fd, F_GETFD) >= 0)
				printf(" %d", fd);
		printf("\n");
		return 0;
	}
	if (!strcmp(a, "segv")) {
		volatile uintptr_t addr = 8;
		*(volatile int *)addr = 1;
		return 1;
	}
	if (!strcmp(a, "abort"))
		abort();
	if (!strcmp(a, "sleep")) {
		sleep((unsigned)atoi(x));
		return 0;
	}
	if (!strcmp(a, "id")) {
		printf("ID uid=%d gid=%d pid=%d ppid=%d\n", (int)getuid(), (int)getgid(), (int)getpid(),
		       (int)getppid());
		return 0;
	}
	if (!strcmp(a, "ls")) {
		DIR *d = opendir(x);
		if (!d)
			return result(a, -1);
		struct dirent *de;
		printf("LS");
		while ((de = readdir(d)))
			printf(" %s", de->d_name);
		printf("\n");
		closedir(d);
		return 0;
	}
	if (!strcmp(a, "tool-send")) {
		/* a tool's channel, opened before the filter (--tool-socket) */
		ssize_t n = send(tool_sock, "x", 1, MSG_DONTWAIT);
		return result(a, n < 0 ? -1 : 0);
	}
	if (!strcmp(a, "watched")) {
		/* watched: seals one page of its own, tells the parent on fd 3 (its pid comes with the
		 * message), waits for the go, then does x: "mprotect" or "munmap" of the sealed page, the
		 * same of an unsealed one ("mprotect-free", "munmap-free"), or "seccomp" (a filter) */
		unsigned char *pg = sealed_page;
		if (!pg && strcmp(x, "mprotect-image"))
			return result("seal", -1);
		char go;
		if (write(3, "R", 1) != 1 || read(3, &go, 1) != 1)
			return result("sync", -1);
		if (!strcmp(x, "mprotect"))
			return result(a, mprotect(pg, 4096, PROT_READ));
		if (!strcmp(x, "munmap"))
			return result(a, munmap(pg, 4096));
		if (!strcmp(x, "mprotect-free"))
			return result(a, mprotect(pg + 4096, 4096, PROT_READ));
		if (!strcmp(x, "munmap-free"))
			return result(a, munmap(pg + 4096, 4096));
		if (!strcmp(x, "mprotect-image")) { /* its own read-only data's page, file-backed */
			static const char rodata[] = "a string of the helper's read-only data";
			return result(a, mprotect((void *)((uintptr_t)rodata & ~(uintptr_t)4095), 4096, PROT_READ | PROT_WRITE));
		}
		if (!strcmp(x, "madvise-hint"))
			return result(a, madvise(pg, 4096, MADV_WILLNEED));
		if (!strcmp(x, "madvise-dontneed"))
			return result(a, madvise(pg, 4096, MADV_DONTNEED));
		if (!strcmp(x, "seccomp")) {
			struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
			struct sock_fprog fp = {.len = 1, .filter = &allow};
			return result(a, (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp));
		}
		return 2;
	}
	if (!strcmp(a, "sigaction")) {
		/* a handler for signal x (a number) */
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_IGN;
		return result(a, sigaction(atoi(x), &sa, NULL));
	}
	if (!strcmp(a, "write-fd")) {
		ssize_t n = write(atoi(x), y, strlen(y));
		return result(a, n < 0 ? -1 : 0);
	}
	fprintf(stderr, "try-syscall: unknown action %s\n", a);
	return 2;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	struct kg_sb_filter_opts o = {0};
	int apply = 0, ioctl_fds[4], n_ioctl = 0, msg_fds[1], n_msg = 0, n_names = 0;
	const char *names[17];
	int i = 1;
	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--apply") && i + 1 < argc) {
			if (kg_sb_profile_parse(argv[++i], &o.profile)) {
				fprintf(stderr, "try-syscall: unknown profile %s\n", argv[i]);
				return 2;
			}
			apply = 1;
		} else if (!strcmp(argv[i], "--threads")) {
			o.allow_threads = 1;
		} else if (!strcmp(argv[i], "--mem") && i + 1 < argc) {
			o.mem_bytes = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--ro-opens")) {
			o.readonly_opens = 1;
		} else if (!strcmp(argv[i], "--syscall") && i + 1 < argc && n_names < 16) {
			names[n_names++] = argv[++i];
		} else if (!strcmp(argv[i], "--ioctl-fd") && i + 1 < argc && n_ioctl < 4) {
			ioctl_fds[n_ioctl++] = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--tool-socket") || !strcmp(argv[i], "--tool-socket-allowed")) {
			/* what a tool's injected library leaves behind: a connected socket above the
			 * handed fds, optionally named to the filter as one of msg_fds */
			int sv[2];
			if (tool_sock < 0 && !socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
				tool_sock = sv[0];
			if (!strcmp(argv[i], "--tool-socket-allowed") && tool_sock >= 0)
				msg_fds[0] = tool_sock, n_msg = 1;
		} else {
			fprintf(stderr, "try-syscall: bad option %s\n", argv[i]);
			return 2;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "usage: try-syscall [--apply compile|run] [--threads] [--mem N] [--ro-opens] "
				"[--syscall NAME]... ACTION [ARG...]\n");
		return 2;
	}
	names[n_names] = NULL;
	o.syscalls = names;
	o.ioctl_fds = ioctl_fds;
	o.n_ioctl_fds = n_ioctl;
	o.msg_fds = msg_fds;
	o.n_msg_fds = n_msg;
	if (!strcmp(argv[i], "watched")) {
		unsigned char *pg = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		kg_error e = {0};
		if (pg != MAP_FAILED && !kg_sb_seal_range(pg, 4096, &e))
			sealed_page = pg;
	}
	if (apply) {
		kg_error e = {0};
		if (kg_sb_seccomp_apply(&o, &e)) {
			printf("APPLY-FAILED %s\n", e.msg);
			return 3;
		}
	}
	return act(argv[i], argc - i - 1, argv + i + 1);
}
