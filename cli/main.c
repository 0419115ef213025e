/* The kgate command line: `kgate verify`, the dispatch to `tasks`, `validate`, `doctor`, `version`
 * and the commands other rooms register in cli/commands.h. Everything a command line can get wrong
 * is exit 2 before any work; the long commands run under the supervisor (cli/supervise.c); results
 * map to the exit codes of the brief (0 accepted, 1 rejected, 2 usage/configuration, 3 internal). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/doctor.h"
#include "cli/supervise.h"
#include "kg_heartbeat.h"
#include "kg_text.h"
#include "kg_vocab.h"
#include "sandbox/sandbox.h"
#include "verifier/plan/backend.h"
#include "verifier/plan/resolve.h"
#include "verifier/report/report.h"
#include "verifier/plan/task.h"
#include "verifier/verify.h"

#ifndef KG_VERSION
#define KG_VERSION "0.1.0"
#endif

static void verify_usage(FILE *f)
{
	/* The backends and their extensions come from the vocabulary, so a new one shows up here. */
	fprintf(f, "usage: kgate verify TASK CANDIDATE [options]\n"
		   "  TASK        a task name (kgate tasks lists them), a task.yaml path, or a KernelBench-format\n"
		   "              PyTorch module (PROBLEM.py: its Model is the trusted reference)\n"
		   "  CANDIDATE   one source file; its extension names the backend (");
	for (int i = 0; i < KG_BACKEND_COUNT_; i++)
		fprintf(f, "%s%s %s%s", i ? ", " : "", kg_backend_ext((enum kg_backend_id)i),
			kg_backend_name((enum kg_backend_id)i),
			kg_backend_get((enum kg_backend_id)i)->module_tasks_only ? ": a ModelNew module" : "");
	fprintf(f, ")\n");
	fprintf(f,
		"options:\n"
		"  --policy P          policy name (default, strict, ci) or YAML path (default: $KGATE_POLICY,\n"
		"                      else default)\n"
		"  --report FMT:PATH   write a report: json, sarif, junit or text; PATH '-' is stdout (the\n"
		"                      summary then goes to stderr); may be given several times\n"
		"  --source-root DIR   SARIF locations relative to DIR (the repository's root; default: the\n"
		"                      current directory), under uriBaseId %%SRCROOT%%\n"
		"  --shape-set NAME    base shapes from the task (nominal, ci, ...); default: the policy's\n"
		"  --shapes MODE       nominal (base shape only) or variants (also the task's variants)\n"
		"  --dims N=V,...      a PyTorch module task: its top-level integer constants set first (what\n"
		"                      derives from them follows); the dims named are varied in secret shapes\n"
		"  --backend B         one of: %s (default: from the file extension)\n"
		"  --reference B       run the task's reference on backend B (cpu: the C reference, also for a\n"
		"                      CUDA candidate; used to check the CUDA references themselves)\n"
		"  --flag F            pass a compiler flag (must be allowed by the policy); repeatable\n"
		"  --seed S            reuse the seed of an earlier report (reproduction)\n"
		"  --trials N          seeds per input class (overrides the policy)\n"
		"  --iterations N      timed iterations (0 skips timing)\n"
		"  --no-layer L        do not attempt a sandbox layer (e.g. userns on hosts that forbid it)\n"
		"  --keep              keep the work directory and print its path\n"
		"  --no-cache          compile without the compile cache (neither read nor written; see\n"
		"                      kgate cache --help)\n"
		"  -q, --quiet         no summary and no heartbeat (errors are still printed on stderr)\n"
		"  --progress          progress line on stderr (default when stderr is a terminal)\n"
		"  --heartbeat S       when stderr is not a terminal, a line with the phase and an estimate\n"
		"                      every S seconds (default 10; 0: none)\n"
		"exit: 0 accepted, 1 rejected, 2 usage or configuration error, 3 not verified (internal or\n"
		"infrastructure error, e.g. no GPU for a .cu); 130/143/129 after SIGINT/SIGTERM/SIGHUP\n",
		kg_backend_names());
}

/* A strict unsigned number: strtoull alone would take "-1" (as 2^64-1) and leading blanks. */
static char seed_text[80]; /* --seed's text, kept out of argv (a report's 64 hex digits fit) */

static int parse_seed(const char *s, uint64_t *out)
{
	char *end = NULL;
	if (!*s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

struct verify_args {
	struct kg_verify_opts o;
	const char *reports[16];
	const char *flags[32];
	const char *source_root;
	int n_reports, n_flags, quiet, heartbeat_s, to_stdout;
};

/* Everything checked before any work: a bad option, report or path is exit 2 at once. */
static int verify_parse(int argc, char **argv, struct verify_args *a)
{
	static const struct option opts[] = {
		{"policy", required_argument, 0, 'p'},	  {"report", required_argument, 0, 'r'},
		{"shape-set", required_argument, 0, 's'}, {"shapes", required_argument, 0, 'S'},
		{"backend", required_argument, 0, 'b'},	  {"flag", required_argument, 0, 'f'},
		{"seed", required_argument, 0, 'x'},	  {"trials", required_argument, 0, 't'},
		{"iterations", required_argument, 0, 'i'}, {"no-layer", required_argument, 0, 'L'},
		{"keep", no_argument, 0, 'k'},		  {"quiet", no_argument, 0, 'q'},
		{"reference", required_argument, 0, 'R'}, {"heartbeat", required_argument, 0, 'H'},
		{"source-root", required_argument, 0, 'T'}, {"dims", required_argument, 0, 'D'},
		{"progress", no_argument, 0, 'P'},	  {"help", no_argument, 0, 'h'},
		{"no-cache", no_argument, 0, 'C'},
		{0, 0, 0, 0},
	};
	struct kg_verify_opts *o = &a->o;
	int ch, progress = -1;
	a->heartbeat_s = 10;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		char *end = NULL;
		switch (ch) {
		case 'p':
			o->policy = optarg;
			break;
		case 'r':
			if (a->n_reports >= 16) {
				fprintf(stderr, "kgate: at most 16 --report options\n");
				return KG_EXIT_USAGE;
			}
			a->reports[a->n_reports++] = optarg;
			break;
		case 's':
			o->shape_set = optarg;
			break;
		case 'S':
			o->shapes_mode = optarg;
			break;
		case 'D':
			o->dims = optarg;
			break;
		case 'b':
			o->backend = optarg;
			break;
		case 'R':
			o->reference_backend = optarg;
			break;
		case 'T':
			a->source_root = optarg;
			break;
		case 'f':
			if (a->n_flags >= 32) {
				fprintf(stderr, "kgate: at most 32 --flag options\n");
				return KG_EXIT_USAGE;
			}
			a->flags[a->n_flags++] = optarg;
			break;
		case 'x':
			/* a report's seed (64 hex digits, the run's key; checked in the plan) or a number a
			 * key is derived from */
			if (strlen(optarg) != 64 && parse_seed(optarg, &o->seed)) {
				fprintf(stderr, "kgate: --seed: expected a report's 64-hex-digit seed or an unsigned "
						"number (decimal or 0x...), got '%s'\n",
					optarg);
				return KG_EXIT_USAGE;
			}
			/* argv is what /proc/PID/cmdline shows, and a sandbox's first process is a clone of
			 * this one that keeps it: a candidate would read the run's key there. The seed is
			 * kept here and wiped from argv before anything is spawned. */
			snprintf(seed_text, sizeof(seed_text), "%s", optarg);
			memset(optarg, 'x', strlen(optarg));
			o->seed_text = seed_text;
			o->has_seed = 1;
			break;
		case 't':
		case 'i':
		case 'H': {
			long v = strtol(optarg, &end, 10);
			if (!*optarg || *optarg == ' ' || *end || v < 0 || v > 100000 || (ch == 't' && v == 0)) {
				fprintf(stderr, "kgate: --%s: bad value '%s'\n",
					ch == 't' ? "trials" : ch == 'i' ? "iterations" : "heartbeat", optarg);
				return KG_EXIT_USAGE;
			}
			if (ch == 't')
				o->trials = (int)v;
			else if (ch == 'i')
				o->iterations = (int)v;
			else
				a->heartbeat_s = (int)v;
			break;
		}
		case 'L': {
			unsigned bit = kg_sb_layer_parse(optarg);
			if (!bit) {
				fprintf(stderr, "kgate: --no-layer: unknown layer %s\n", optarg);
				return KG_EXIT_USAGE;
			}
			o->disabled_layers |= bit;
			break;
		}
		case 'k':
			o->keep_workdir = 1;
			break;
		case 'C':
			o->no_cache = 1;
			break;
		case 'q':
			a->quiet = 1;
			break;
		case 'P':
			progress = KG_PROGRESS_LINE;
			break;
		case 'h':
			verify_usage(stdout);
			return -1;
		default:
			verify_usage(stderr);
			return KG_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		if (argc - optind > 2)
			fprintf(stderr, "kgate verify: unexpected argument '%s'\n", argv[optind + 2]);
		verify_usage(stderr);
		return KG_EXIT_USAGE;
	}
	o->task = argv[optind];
	o->candidate = argv[optind + 1];
	o->flags = a->flags;
	o->n_flags = a->n_flags;
	for (int i = 0; i < a->n_reports; i++) {
		kg_error e = {0};
		if (kg_report_check(a->reports[i], &e)) {
			fprintf(stderr, "kgate: %s\n", e.msg);
			return KG_EXIT_USAGE;
		}
		const char *path = strchr(a->reports[i], ':') + 1;
		if (!strcmp(path, "-") && a->to_stdout++) {
			fprintf(stderr, "kgate: at most one --report may go to stdout ('-')\n");
			return KG_EXIT_USAGE;
		}
	}
	/* a terminal gets the one updating line; a log (CI) gets plain heartbeat lines */
	if (progress < 0)
		progress = isatty(2) ? KG_PROGRESS_LINE : a->heartbeat_s ? KG_PROGRESS_HEARTBEAT : KG_PROGRESS_NONE;
	o->progress = a->quiet ? KG_PROGRESS_NONE : progress;
	return 0;
}

/* An error on stderr: it may quote a line of the user's file or a compiler's words, never raw
 * control bytes. */
static void put_error(const char *prefix, const char *msg)
{
	char *t = kg_text_safe_dup(msg, KG_TEXT_MULTILINE, NULL);
	fprintf(stderr, "kgate: %s%s\n", prefix, t ? t : msg);
	free(t);
}

static int run_verify(int argc, char **argv)
{
	struct verify_args *a = calloc(1, sizeof(*a));
	if (!a) {
		fprintf(stderr, "kgate: out of memory\n");
		return KG_EXIT_INTERNAL;
	}
	a->o.iterations = -1;
	int rc = verify_parse(argc, argv, a);
	if (rc) {
		free(a);
		return rc < 0 ? 0 : rc;
	}
	struct kg_verdict v;
	kg_error e = {0};
	if (a->o.progress == KG_PROGRESS_HEARTBEAT)
		kg_heartbeat_start(a->o.task, a->heartbeat_s);
	rc = kg_verify(&a->o, &v, &e);
	kg_heartbeat_stop();
	if (rc) {
		put_error("", e.msg);
		kg_verdict_free(&v);
		free(a);
		return KG_EXIT_USAGE;
	}
	int exit_code = v.exit_code;
	if (a->source_root)
		snprintf(v.source_root, sizeof(v.source_root), "%s", a->source_root);
	/* stdout is the report's when one goes there: the summary moves to stderr */
	int text_on_stdout = 0;
	for (int i = 0; i < a->n_reports; i++)
		text_on_stdout |= !strcmp(a->reports[i], "text:-");
	if (!a->quiet && !text_on_stdout)
		kg_report_text_file(&v, a->to_stdout ? stderr : stdout);
	/* -q hides the summary, never an error: exit 3 always says why */
	if (exit_code == KG_EXIT_INTERNAL && (a->quiet || a->to_stdout))
		put_error(strncmp(v.internal_error, "not verified", 12) ? "not verified: " : "",
			  v.internal_error[0] ? v.internal_error : "an infrastructure reason (see the report)");
	for (int i = 0; i < a->n_reports; i++) {
		kg_error re = {0};
		if (kg_report_write(&v, a->reports[i], &re)) {
			fprintf(stderr, "kgate: report %s: %s\n", a->reports[i], re.msg);
			if (exit_code == KG_EXIT_ACCEPTED)
				exit_code = KG_EXIT_INTERNAL;
		}
	}
	kg_verdict_free(&v);
	free(a);
	return exit_code;
}

static int cmd_verify(int argc, char **argv)
{
	int keep = 0;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		keep |= !strcmp(argv[i], "--keep");
	return kg_supervise("verify", keep, run_verify, argc, argv);
}

/* The built-in commands besides verify (which asks the supervisor to keep --keep's directory).
 * Those that spawn a sandbox run under the supervisor, as verify and search do: interrupted, they
 * leave no process and no temporary directory, and say so (kgate 0.2's `task import` left its
 * sandboxed torch process and /tmp/kgate-derive-* behind). tasks and validate read files only. */
static const struct kg_command builtins[] = {
	{"tasks", NULL, kg_cmd_tasks, 0},
	{"task", NULL, kg_cmd_task, 1}, /* task import: sandboxed torch processes, a few modules each */
	{"validate", NULL, kg_cmd_validate, 0},
	{"doctor", NULL, kg_cmd_doctor, 1}, /* a sandboxed /bin/true per profile */
	{NULL, NULL, NULL, 0},
};

static int dispatch(const struct kg_command *c, int argc, char **argv)
{
	return c->supervised ? kg_supervise(c->name, 0, c->run, argc, argv) : c->run(argc, argv);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: kgate COMMAND [options]\ncommands:\n"
		   "  verify TASK CANDIDATE   verify one candidate kernel (kgate verify --help)\n"
		   "  validate FILE...        check task manifests and policies without running anything\n"
		   "  tasks [--json]          list the tasks kgate finds by name\n"
		   "  task import PROBLEM.py --out DIR | --kernelbench DIR --out DIR\n"
		   "                          a KernelBench-format module (or a level's) as task manifests\n"
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
	for (const struct kg_command *c = builtins; c->name; c++)
		if (!strcmp(cmd, c->name))
			return dispatch(c, argc - 1, argv + 1);
	int is_version = !strcmp(cmd, "version") || !strcmp(cmd, "--version");
	int is_help = !strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h");
	if ((is_version || is_help) && argc > 2) {
		fprintf(stderr, "kgate %s: unexpected argument '%s'\n", cmd, argv[2]);
		usage(stderr);
		return KG_EXIT_USAGE;
	}
	if (is_version) {
		printf("kgate %s (candidate ABI %d)\n", KG_VERSION, KG_ABI_VERSION);
		return 0;
	}
	if (is_help) {
		usage(stdout);
		return 0;
	}
	for (const struct kg_command *c = kg_extra_commands; c && c->name; c++)
		if (!strcmp(cmd, c->name))
			return dispatch(c, argc - 1, argv + 1);
	fprintf(stderr, "kgate: unknown command '%s'\n", cmd);
	usage(stderr);
	return KG_EXIT_USAGE;
}
