/* The supervisor around every command that spawns sandboxes (`kgate verify`, `search`, `task
 * import`, `doctor`: cli/main.c): signals and crashes leave nothing.
 * The command runs in a forked worker whose TMPDIR is a session directory of ours; we are a child
 * subreaper, so every process the worker starts (sandboxes, runners, compilers, agent hosts) is
 * ours to reap once its parent is gone. On SIGINT, SIGTERM or SIGHUP, or when the worker dies of a
 * signal, the worker and every descendant are killed and waited for, the session directory goes,
 * and one line says what happened. */
#include "cli/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kg_common.h"
#include "verifier/judge/verdict.h"

/* Our children by /proc (the subreaper's orphans included): each gets SIGKILL. Returns how many. */
static int kill_children(pid_t self)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d))) {
		char path[64], buf[512];
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* pid (comm) state ppid ...: comm may hold anything, so parse after the last ')' */
		const char *rp = strrchr(buf, ')');
		char state;
		int ppid;
		if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self) {
			kill((pid_t)atoi(de->d_name), SIGKILL);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* Kills and reaps every descendant: the dead worker's orphans come to us one generation at a
 * time, so this repeats until nothing is left (or 10 s passed, which would be a kernel's bug). */
static void end_tree(pid_t self)
{
	for (int round = 0; round < 1000; round++) {
		kill_children(self);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

static int session_dir(char *out, size_t outsz)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(out, outsz, "%s/kgate-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(out))
		return -errno;
	/* the sandboxed compiler runs as an unprivileged id and must reach the work dirs inside */
	chmod(out, 0711);
	return 0;
}

int kg_supervise(const char *what, int keep, int (*fn)(int, char **), int argc, char **argv)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	char dir[4096];
	int rc = session_dir(dir, sizeof(dir));
	if (rc) {
		fprintf(stderr, "kgate: cannot create a work directory under $TMPDIR: %s\n", strerror(-rc));
		return KG_EXIT_INTERNAL;
	}
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < KG_ARRAY_LEN(sigs); i++) {
		struct sigaction sa;
		/* an inherited SIG_IGN (nohup, a background job) is the caller's choice: kept */
		if (!sigaction(sigs[i], NULL, &sa) && sa.sa_handler != SIG_IGN)
			sigaddset(&set, sigs[i]);
	}
	sigprocmask(SIG_BLOCK, &set, &old);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	pid_t self = getpid();
	fflush(NULL);
	pid_t worker = fork();
	if (worker < 0) {
		fprintf(stderr, "kgate: fork: %s\n", strerror(errno));
		kg_rmtree(dir);
		return KG_EXIT_INTERNAL;
	}
	if (worker == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self)
			_exit(KG_EXIT_INTERNAL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		setenv("TMPDIR", dir, 1);
		exit(fn(argc, argv));
	}
	int status = 0, sig = 0;
	for (;;) {
		siginfo_t si;
		int s = sigwaitinfo(&set, &si);
		if (s < 0)
			continue;
		if (s != SIGCHLD) {
			sig = s;
			/* A search may have work outside this tree to stop (Slurm jobs: agents/slurm.c cancels
			 * them on the signal), so it gets the signal and a grace period first. */
			int reaped = 0;
			if (!strcmp(what, "search") && !kill(worker, s))
				for (int i = 0; i < 300 && !(reaped = waitpid(worker, &status, WNOHANG) == worker); i++)
					nanosleep(&(struct timespec){0, 100000000}, NULL);
			if (!reaped) {
				kill(worker, SIGKILL);
				waitpid(worker, &status, 0);
			}
			break;
		}
		pid_t p;
		int st, done = 0;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == worker) {
				status = st;
				done = 1;
			}
		if (done)
			break;
	}
	end_tree(self);
	int code;
	if (sig) {
		fprintf(stderr, "kgate: %s interrupted (%s)\n", what, strsignal(sig));
		code = 128 + sig;
	} else if (WIFSIGNALED(status)) {
		fprintf(stderr, "kgate: internal error: the %s process died of %s; nothing of it is left\n", what,
			strsignal(WTERMSIG(status)));
		code = KG_EXIT_INTERNAL;
	} else {
		code = WEXITSTATUS(status);
	}
	/* --keep asks for the work directory (the worker printed its path): the session directory
	 * around it stays only then, and only after a normal end */
	if (keep && !sig && !WIFSIGNALED(status))
		rmdir(dir); /* gone only when empty: the kept work directory is inside */
	else
		kg_rmtree(dir);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return code;
}
