/* `kgate task import`: KernelBench-format PyTorch modules turned into ordinary task manifests (the
 * module beside its task.yaml as the reference), one file or every problem file of a directory
 * (a KernelBench level). A module kgate cannot map is named with its reason, never a crash. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "kg_common.h"
#include "verifier/torchtask.h"
#include "verifier/verdict.h"

static void import_usage(FILE *f)
{
	fprintf(f, "usage: kgate task import PROBLEM.py --out DIR [--dims N=V,...]\n"
		   "       kgate task import --kernelbench LEVEL_DIR --out DIR [--dims N=V,...]\n"
		   "  writes DIR/task.yaml (one module) or DIR/NAME/task.yaml (each *.py of LEVEL_DIR), each\n"
		   "  with a copy of its module as the trusted reference (reference: {torch: NAME.py})\n"
		   "exit: 0 all imported, 1 some could not be mapped (each named), 2 usage error\n");
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int import_dir(const char *dir, const char *out, const char *dims)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "kgate: %s: %s\n", dir, strerror(errno));
		return KG_EXIT_USAGE;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !kg_task_is_module(de->d_name))
			continue;
		if (n == cap) {
			char **g = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));
			if (!g)
				break;
			names = g;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_str);
	int ok = 0, bad = 0;
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX], sub[PATH_MAX], stem[256];
		snprintf(stem, sizeof(stem), "%.*s", (int)(strlen(names[i]) - 3), names[i]);
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		snprintf(sub, sizeof(sub), "%s/%s", out, stem);
		kg_error e = {0};
		if (kg_torch_import(path, dims, sub, &e)) {
			printf("skipped   %s: %s\n", names[i], e.msg);
			bad++;
		} else {
			printf("imported  %s -> %s/task.yaml\n", names[i], sub);
			ok++;
		}
		free(names[i]);
	}
	free(names);
	printf("%d imported, %d not mapped\n", ok, bad);
	return bad ? 1 : 0;
}

int kg_cmd_task(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "import")) {
		import_usage(stderr);
		return KG_EXIT_USAGE;
	}
	const char *module = NULL, *level = NULL, *out = NULL, *dims = NULL;
	for (int i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			import_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--out") && v) {
			out = v, i++;
		} else if (!strcmp(argv[i], "--kernelbench") && v) {
			level = v, i++;
		} else if (!strcmp(argv[i], "--dims") && v) {
			dims = v, i++;
		} else if (argv[i][0] != '-' && !module) {
			module = argv[i];
		} else {
			fprintf(stderr, "kgate task import: unexpected argument '%s'\n", argv[i]);
			import_usage(stderr);
			return KG_EXIT_USAGE;
		}
	}
	if (!out || !!module == !!level) {
		import_usage(stderr);
		return KG_EXIT_USAGE;
	}
	if (level)
		return import_dir(level, out, dims);
	kg_error e = {0};
	int rc = kg_torch_import(module, dims, out, &e);
	if (rc) {
		fprintf(stderr, "kgate: %s\n", e.msg);
		return rc == -ENOENT && !strstr(e.msg, module) ? 3 : KG_EXIT_USAGE;
	}
	printf("imported  %s -> %s/task.yaml\n", module, out);
	return 0;
}
