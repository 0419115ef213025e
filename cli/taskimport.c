/* `kgate task import`: KernelBench-format PyTorch modules turned into ordinary task manifests (the
 * module beside its task.yaml as the trusted reference), one file or every problem file of a
 * directory (a KernelBench level). A directory's modules go through a few sandboxed torch
 * processes, one module after another (verifier/plan/torchderive.c); each has its own time bound. A
 * module kgate cannot map, or that runs past its bound, is named with its reason, never a crash. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "kg_common.h"
#include "verifier/plan/torchderive.h"
#include "verifier/plan/torchtask.h"
#include "verifier/judge/verdict.h"

static void import_usage(FILE *f)
{
	fprintf(f, "usage: kgate task import PROBLEM.py --out DIR [--dims N=V,...] [--timeout S]\n"
		   "       kgate task import --kernelbench LEVEL_DIR --out DIR [--dims N=V,...] [--timeout S]\n"
		   "  writes DIR/task.yaml (one module) or DIR/NAME/task.yaml (each *.py of LEVEL_DIR), each\n"
		   "  with a copy of its module as the trusted reference (reference: {torch: NAME.py});\n"
		   "  --timeout: each module's bound in seconds (default 60 in a directory, 600 alone)\n"
		   "exit: 0 all imported, 1 some could not be mapped (each named), 2 usage error\n");
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct import {
	char **files; /* the module's file name within dir */
	char (*names)[64];
	const char *out;
	int ok, bad;
};

/* Each module as it is done, in order: its files written, one line said. */
static void imported(struct kg_torch_job *j, size_t i, void *arg)
{
	struct import *im = arg;
	char sub[PATH_MAX];
	const char *f = im->files[i];
	snprintf(sub, sizeof(sub), "%s/%.*s", im->out, (int)(strlen(f) - 3), f);
	kg_error e = {0};
	if (!j->rc && kg_torch_write_task(j->module, j->name, &j->yaml, sub, &e))
		j->rc = e.code, snprintf(j->msg, sizeof(j->msg), "%s", e.msg);
	if (j->rc) {
		/* the line names the file already */
		size_t ml = strlen(j->module);
		const char *why = !strncmp(j->msg, j->module, ml) && !strncmp(j->msg + ml, ": ", 2) ? j->msg + ml + 2 : j->msg;
		printf("skipped   %s: %s\n", f, why);
		im->bad++;
	} else {
		printf("imported  %s -> %s/task.yaml (%.2f s)\n", f, sub, j->seconds);
		im->ok++;
	}
	fflush(stdout);
	kg_buf_free(&j->yaml);
}

static int import_dir(const char *dir, const char *out, const char *dims, double file_s)
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
	struct import im = {.files = names, .names = calloc(n ? n : 1, sizeof(*im.names)), .out = out};
	struct kg_torch_job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	char(*paths)[PATH_MAX] = calloc(n ? n : 1, sizeof(*paths));
	int rc = 0;
	if (!im.names || !jobs || !paths) {
		fprintf(stderr, "kgate: out of memory\n");
		rc = KG_EXIT_INTERNAL;
	}
	for (size_t i = 0; !rc && i < n; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/%s", dir, names[i]);
		kg_torch_task_name(names[i], im.names[i], sizeof(im.names[i]));
		jobs[i] = (struct kg_torch_job){.module = paths[i], .name = im.names[i]};
	}
	struct kg_torch_derive_opts o = {.dims = dims, .file_s = file_s, .done = imported, .arg = &im};
	kg_error e = {0};
	if (!rc && (rc = kg_torch_derive_jobs(jobs, n, &o, &e))) {
		fprintf(stderr, "kgate: %s\n", e.msg);
		rc = rc == -ENOENT ? KG_EXIT_INTERNAL : KG_EXIT_USAGE;
	} else if (!rc) {
		printf("%d imported, %d not mapped\n", im.ok, im.bad);
		rc = im.bad ? 1 : 0;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(im.names);
	free(jobs);
	free(paths);
	return rc;
}

int kg_cmd_task(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "import")) {
		import_usage(stderr);
		return KG_EXIT_USAGE;
	}
	const char *module = NULL, *level = NULL, *out = NULL, *dims = NULL;
	double file_s = 0;
	for (int i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			import_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--out") && v) {
			out = v, i++;
		} else if (!strcmp(argv[i], "--kernelbench") && v) {
			level = v, i++;
		} else if (!strcmp(argv[i], "--dims") && v) {
			dims = v, i++;
		} else if (!strcmp(argv[i], "--timeout") && v && (file_s = strtod(v, &end)) > 0 && !*end && file_s <= 86400) {
			i++;
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
		return import_dir(level, out, dims, file_s);
	char name[64];
	kg_torch_task_name(module, name, sizeof(name));
	struct kg_torch_job j = {.module = module, .name = name};
	struct kg_torch_derive_opts o = {.dims = dims, .file_s = file_s > 0 ? file_s : 600, .workers = 1};
	kg_error e = {0};
	int rc = kg_torch_derive_jobs(&j, 1, &o, &e);
	if (!rc && (rc = j.rc))
		snprintf(e.msg, sizeof(e.msg), "%s", j.msg);
	if (!rc)
		rc = kg_torch_write_task(module, name, &j.yaml, out, &e);
	kg_buf_free(&j.yaml);
	if (rc) {
		fprintf(stderr, "kgate: %s\n", e.msg);
		return rc == -ENOENT && !strstr(e.msg, module) ? 3 : KG_EXIT_USAGE;
	}
	printf("imported  %s -> %s/task.yaml\n", module, out);
	return 0;
}
