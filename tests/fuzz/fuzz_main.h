/* The main of every fuzz harness (tests/fuzz/fuzz_*.c): under afl-cc, AFL++'s persistent loop over
 * shared-memory test cases; otherwise a replay program that runs each file named on its command
 * line, or every file of the harness's seed corpus (tests/fuzz/corpus/NAME under $KGATE_HOME or
 * the current directory), so that `make test` replays the corpus everywhere. A harness defines
 * FUZZ_NAME, fuzz_setup() and fuzz_one(); a crash or a sanitizer report is the failure. */
#ifndef KG_FUZZ_MAIN_H
#define KG_FUZZ_MAIN_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kg_common.h"

static void fuzz_setup(void);
static void fuzz_one(const uint8_t *data, size_t len);

#ifdef __AFL_FUZZ_TESTCASE_LEN
__AFL_FUZZ_INIT();

int main(void)
{
	/* Set up in each forked child, not before the fork server: a harness's atexit cleanup (its
	 * scratch directory) runs when a child leaves the persistent loop, and the next child, forked
	 * from a parent that set up once, then found its directory gone and aborted (CI: a "crash"
	 * at exactly execs 10001 in task and policy). */
	__AFL_INIT();
	fuzz_setup();
	unsigned char *buf = __AFL_FUZZ_TESTCASE_BUF;
	while (__AFL_LOOP(10000))
		fuzz_one(buf, (size_t)__AFL_FUZZ_TESTCASE_LEN);
	return 0;
}
#else
static int replay_file(const char *path)
{
	char *data = NULL;
	size_t len = 0;
	kg_error e = {0};
	if (kg_read_file(path, 4u << 20, &data, &len, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}
	fuzz_one((const uint8_t *)data, len);
	free(data);
	return 0;
}

static int replay_dir(const char *dir, int *n)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "%s: cannot open the corpus\n", dir);
		return 1;
	}
	struct dirent *de;
	int bad = 0;
	while ((de = readdir(d))) {
		char p[4096];
		struct stat st;
		if (de->d_name[0] == '.' || snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p) ||
		    stat(p, &st) || !S_ISREG(st.st_mode))
			continue;
		bad |= replay_file(p);
		(*n)++;
	}
	closedir(d);
	return bad;
}

int main(int argc, char **argv)
{
	int bad = 0, n = 0;
	fuzz_setup();
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			struct stat st;
			if (!stat(argv[i], &st) && S_ISDIR(st.st_mode))
				bad |= replay_dir(argv[i], &n);
			else
				bad |= replay_file(argv[i]), n++;
		}
	} else {
		const char *home = getenv("KGATE_HOME");
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", home && *home ? home : ".", FUZZ_NAME);
		bad |= replay_dir(dir, &n);
	}
	printf("fuzz-%s: %d inputs replayed%s\n", FUZZ_NAME, n, bad ? ", some unreadable" : "");
	return bad || !n;
}
#endif

#endif
