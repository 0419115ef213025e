/* The kgate command line: `kgate verify`, `kgate tasks`, `kgate version`, and the commands other
 * rooms register in cli/commands.h. Parses arguments, calls the library, maps results to the exit
 * codes of the brief (0 accepted, 1 rejected, 2 usage/configuration, 3 internal). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/doctor.h"
#include "kg_vocab.h"
#include "sandbox/sandbox.h"
#include "verifier/resolve.h"
#include "verifier/task.h"
#include "verifier/verify.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

static void verify_usage(FILE *f)
{
	/* The backends and their extensions come from the vocabulary, so a new one shows up here. */
	fprintf(f, "usage: kgate verify TASK CANDIDATE [options]\n"
		   "  TASK        a task name (kgate tasks lists them) or a task.yaml path\n"
		   "  CANDIDATE   one source file; its extension names the backend (");
	for (int i = 0; i < KG_BACKEND_COUNT_; i++)
		fprintf(f, "%s%s %s", i ? ", " : "", kg_backend_ext((enum kg_backend_id)i),
			kg_backend_name((enum kg_backend_id)i));
	fprintf(f, ")\n");
	fprintf(f,
		"options:\n"
		"  --policy P          policy name (default, strict) or YAML path\n"
		"  --report FMT:PATH   write a report: json, sarif, junit or text; PATH '-' is stdout;\n"
		"                      may be given several times\n"
		"  --shape-set NAME    base shapes from the task (nominal, ci, ...); default: the policy's\n"
		"  --shapes MODE       nominal (base shape only) or variants (also the task's variants)\n"
		"  --backend B         one of: %s (default: from the file extension)\n"
		"  --reference B       run the task's reference on backend B (cpu: the C reference, also for a\n"
		"                      CUDA candidate; used to check the CUDA references themselves)\n"
		"  --flag F            pass a compiler flag (must be allowed by the policy); repeatable\n"
		"  --seed S            reuse the seed of an earlier report (reproduction)\n"
		"  --trials N          seeds per input class (overrides the policy)\n"
		"  --iterations N      timed iterations (0 skips timing)\n"
		"  --no-layer L        do not attempt a sandbox layer (e.g. userns on hosts that forbid it)\n"
		"  --keep              keep the work directory\n"
		"  --quiet             no summary on stdout\n"
		"  --progress          progress line on stderr (default when stderr is a terminal)\n"
		"exit: 0 accepted, 1 rejected, 2 usage or configuration error, 3 internal or infrastructure error\n",
		kg_backend_names());
}

static int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{"policy", required_argument, 0, 'p'},	  {"report", required_argument, 0, 'r'},
		{"shape-set", required_argument, 0, 's'}, {"shapes", required_argument, 0, 'S'},
		{"backend", required_argument, 0, 'b'},	  {"flag", required_argument, 0, 'f'},
		{"seed", required_argument, 0, 'x'},	  {"trials", required_argument, 0, 't'},
		{"iterations", required_argument, 0, 'i'}, {"no-layer", required_argument, 0, 'L'},
		{"keep", no_argument, 0, 'k'},		  {"quiet", no_argument, 0, 'q'},
		{"reference", required_argument, 0, 'R'},
		{"progress", no_argument, 0, 'P'},	  {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	struct kg_verify_opts o = {.iterations = -1, .progress = isatty(2)};
	const char *reports[16];
	const char *flags[32];
	int n_reports = 0, n_flags = 0, quiet = 0, ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		char *end = NULL;
		switch (ch) {
		case 'p':
			o.policy = optarg;
			break;
		case 'r':
			if (n_reports >= 16) {
				fprintf(stderr, "kgate: at most 16 --report options\n");
				return KG_EXIT_USAGE;
			}
			reports[n_reports++] = optarg;
			break;
		case 's':
			o.shape_set = optarg;
			break;
		case 'S':
			o.shapes_mode = optarg;
			break;
		case 'b':
			o.backend = optarg;
			break;
		case 'R':
			o.reference_backend = optarg;
			break;
		case 'f':
			if (n_flags >= 32) {
				fprintf(stderr, "kgate: at most 32 --flag options\n");
				return KG_EXIT_USAGE;
			}
			flags[n_flags++] = optarg;
			break;
		case 'x':
			/* a report's seed (64 hex digits, the run's key; checked in the plan) or a number a
			 * key is derived from */
			if (strlen(optarg) != 64) {
				errno = 0;
				o.seed = strtoull(optarg, &end, 0);
				if (errno || !*optarg || *end) {
					fprintf(stderr, "kgate: --seed: not a report's 64-hex-digit seed nor a number: %s\n",
						optarg);
					return KG_EXIT_USAGE;
				}
			}
			o.seed_text = optarg;
			o.has_seed = 1;
			break;
		case 't':
		case 'i': {
			long v = strtol(optarg, &end, 10);
			if (!*optarg || *end || v < 0 || v > 100000 || (ch == 't' && v == 0)) {
				fprintf(stderr, "kgate: --%s: bad value %s\n", ch == 't' ? "trials" : "iterations", optarg);
				return KG_EXIT_USAGE;
			}
			if (ch == 't')
				o.trials = (int)v;
			else
				o.iterations = (int)v;
			break;
		}
		case 'L': {
			unsigned bit = kg_sb_layer_parse(optarg);
			if (!bit) {
				fprintf(stderr, "kgate: --no-layer: unknown layer %s\n", optarg);
				return KG_EXIT_USAGE;
			}
			o.disabled_layers |= bit;
			break;
		}
		case 'k':
			o.keep_workdir = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'P':
			o.progress = 1;
			break;
		case 'h':
			verify_usage(stdout);
			return 0;
		default:
			verify_usage(stderr);
			return KG_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		verify_usage(stderr);
		return KG_EXIT_USAGE;
	}
	o.task = argv[optind];
	o.candidate = argv[optind + 1];
	o.flags = flags;
	o.n_flags = n_flags;
	/* Report specs are validated before the (possibly long) verification starts. */
	for (int i = 0; i < n_reports; i++) {
		const char *c = strchr(reports[i], ':');
		if (!c || c == reports[i] || !c[1]) {
			fprintf(stderr, "kgate: --report expects FORMAT:PATH, got '%s'\n", reports[i]);
			return KG_EXIT_USAGE;
		}
	}
	struct kg_verdict v;
	kg_error e = {0};
	int rc = kg_verify(&o, &v, &e);
	if (rc) {
		fprintf(stderr, "kgate: %s\n", e.msg);
		kg_verdict_free(&v);
		return KG_EXIT_USAGE;
	}
	int exit_code = v.exit_code;
	if (!quiet)
		kg_report_text(&v, "-", NULL);
	for (int i = 0; i < n_reports; i++) {
		kg_error re = {0};
		if (kg_report_write(&v, reports[i], &re)) {
			fprintf(stderr, "kgate: report %s: %s\n", reports[i], re.msg);
			if (exit_code == KG_EXIT_ACCEPTED)
				exit_code = KG_EXIT_INTERNAL;
		}
	}
	kg_verdict_free(&v);
	return exit_code;
}

static void tasks_usage(FILE *f)
{
	fprintf(f, "usage: kgate tasks\n"
		   "  lists the tasks that kgate verify and kgate search find by name: NAME/task.yaml in the\n"
		   "  first of $KGATE_TASKS, $KGATE_HOME/tasks, %s/tasks, ./tasks\n",
		KG_DATADIR);
}

/* One line per task; an unreadable manifest is listed as such rather than hidden. The name shown
 * is the directory's, the one kg_resolve_task looks up. */
static int print_task(const char *name, const char *path, void *ctx)
{
	int *valid = ctx;
	struct kg_task t;
	kg_error e = {0};
	if (kg_task_load(path, &t, &e)) {
		printf("%-16s (invalid: %s)\n", name, e.msg);
		return 0;
	}
	char dims[128];
	kg_dims_str(&t.shapesets[0].dims, dims, sizeof(dims));
	printf("%-16s %s [nominal %s]\n", name, t.description, dims);
	(*valid)++;
	return 0;
}

static int cmd_tasks(int argc, char **argv)
{
	static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
	int ch, valid = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch == 'h') {
			tasks_usage(stdout);
			return 0;
		}
		tasks_usage(stderr);
		return KG_EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "kgate tasks: unexpected argument '%s'\n", argv[optind]);
		tasks_usage(stderr);
		return KG_EXIT_USAGE;
	}
	/* The resolver's own walk: what is listed is exactly what a name resolves to. */
	int rc = kg_tasks_each(print_task, &valid);
	if (rc < 0) {
		fprintf(stderr, "kgate tasks: %s\n", strerror(-rc));
		return KG_EXIT_INTERNAL;
	}
	if (!valid) {
		fprintf(stderr, "kgate: no tasks found\n");
		return KG_EXIT_USAGE;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: kgate COMMAND [options]\ncommands:\n"
		   "  verify TASK CANDIDATE   verify one candidate kernel (kgate verify --help)\n"
		   "  tasks                   list the tasks kgate finds by name\n"
		   "  doctor [--gpu]          what this host offers: sandbox layers, toolchains, GPU\n");
	for (const struct kg_command *c = kg_extra_commands; c && c->name; c++)
		fprintf(f, "  %-23s %s\n", c->name, c->help);
	fprintf(f, "  version                 print the version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return KG_EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "verify"))
		return cmd_verify(argc - 1, argv + 1);
	if (!strcmp(cmd, "tasks"))
		return cmd_tasks(argc - 1, argv + 1);
	if (!strcmp(cmd, "doctor"))
		return kg_cmd_doctor(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("kgate %s (candidate ABI %d)\n", KG_VERSION, KG_ABI_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		usage(stdout);
		return 0;
	}
	for (const struct kg_command *c = kg_extra_commands; c && c->name; c++)
		if (!strcmp(cmd, c->name))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "kgate: unknown command '%s'\n", cmd);
	usage(stderr);
	return KG_EXIT_USAGE;
}
