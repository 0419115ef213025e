/* What a sandboxed start costs: spawn + exit of /bin/true inside the sandbox (every layer this host
 * allows) next to plain fork+exec+exit and fork+exit, interleaved round by round so that drift of a
 * noisy host hits every row alike. Goal: under 5 ms added per start. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

#define N 200

enum { ROW_FORK, ROW_FORK_EXEC, ROW_SB_RUN, ROW_SB_COMPILE, ROWS };
static const char *const row_names[ROWS] = {"fork+exit", "fork+exec+exit", "sandbox run",
	"sandbox compile"};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double plain(int do_exec)
{
	uint64_t t0 = kg_now_ns();
	pid_t p = fork();
	if (p == 0) {
		if (do_exec)
			execl("/bin/true", "true", (char *)NULL);
		_exit(0);
	}
	if (p < 0 || waitpid(p, NULL, 0) != p)
		return -1;
	return (double)(kg_now_ns() - t0) / 1e6;
}

static double sandboxed(enum kg_sb_profile prof, unsigned *layers)
{
	static const char *const argv[] = {"/bin/true", NULL};
	struct kg_sb_spec s = {.profile = prof, .argv = argv, .stdin_fd = -1, .limits = {.wall_s = 10}};
	struct kg_sb_child *c = NULL;
	struct kg_sb_outcome o;
	kg_error e = {0};
	uint64_t t0 = kg_now_ns();
	if (kg_sb_spawn(&s, &c, &e)) {
		fprintf(stderr, "sandbox_spawn: %s\n", e.msg);
		return -1;
	}
	kg_sb_wait(c, &o);
	kg_sb_free(c);
	double ms = (double)(kg_now_ns() - t0) / 1e6;
	*layers = o.layers_active;
	return o.end == KG_SB_END_EXIT && o.exit_code == 0 ? ms : -1;
}

int main(void)
{
	static double t[ROWS][N];
	unsigned layers = 0;
	for (int i = 0; i < N; i++) {
		t[ROW_FORK][i] = plain(0);
		t[ROW_FORK_EXEC][i] = plain(1);
		t[ROW_SB_RUN][i] = sandboxed(KG_SB_PROFILE_RUN, &layers);
		t[ROW_SB_COMPILE][i] = sandboxed(KG_SB_PROFILE_COMPILE, &layers);
		for (int r = 0; r < ROWS; r++)
			if (t[r][i] < 0) {
				fprintf(stderr, "sandbox_spawn: %s failed in round %d\n", row_names[r], i);
				return 1;
			}
	}
	double med[ROWS], p90[ROWS];
	for (int r = 0; r < ROWS; r++) {
		qsort(t[r], N, sizeof(double), cmp_double);
		med[r] = t[r][N / 2];
		p90[r] = t[r][N * 9 / 10];
	}
	char names[256];
	printf("sandboxed /bin/true vs plain, N=%d each, interleaved; layers: %s\n", N,
	       kg_sb_layers_str(layers, names, sizeof(names)));
	printf("%-18s %10s %10s %12s %14s\n", "", "median ms", "p90 ms", "vs exec", "added ms (med)");
	for (int r = 0; r < ROWS; r++) {
		printf("%-18s %10.3f %10.3f", row_names[r], med[r], p90[r]);
		if (r >= ROW_SB_RUN)
			printf(" %11.2fx %14.3f", med[r] / med[ROW_FORK_EXEC], med[r] - med[ROW_FORK_EXEC]);
		printf("\n");
	}
	return 0;
}
