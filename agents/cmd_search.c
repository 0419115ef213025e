/* `kgate search TASK --agent PLUGIN ...`: argument parsing, the agent config file, and the hidden
 * `kgate agent-host` mode that the search re-executes itself in to isolate a plugin. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/search.h"
#include "kg_text.h"
#include "kg_vocab.h"
#include "kg_yaml.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kgate search TASK --agent PLUGIN [options]\n"
		"  TASK                  a task name, a task.yaml path, or a KernelBench-format module (PROBLEM.py)\n"
		"  --agent PLUGIN        replay, openai, anthropic, tuner, or the path of an agent plugin (.so)\n"
		"  --template FILE       the tuner's template (.c or .cu with kgate:tune directives); its\n"
		"                        extension picks the backend unless --backend is given\n"
		"options:\n"
		"  --dims N=V,...        a module task's constants (as kgate verify), for every verification\n"
		"  --rounds R            rounds of proposals (default 3)\n"
		"  --branch B            ideas per round (default 2)\n"
		"  --candidates N        candidates per idea (default 2)\n"
		"  --keep K              fastest accepted candidates carried to the next round as seeds (default B)\n"
		"  --out DIR             output directory: history.jsonl, candidates/, winner.* (default\n"
		"                        kgate-search-TASK); a directory with a history is resumed\n"
		"  --jobs J              verifications at once (local: the GPUs for a GPU backend, one each, else\n"
		"                        the CPU cores; slurm: 4)\n"
		"  --executor E          local (default: forked workers on this host) or slurm (each verification\n"
		"                        a job step through sbatch/srun; --out must be on a file system the nodes\n"
		"                        share; GPU backends ask for --gres=gpu:1; ^C cancels the jobs)\n"
		"  --slurm-partition P   the partition to submit to (default: the cluster's)\n"
		"  --slurm-args ARGS     more sbatch options, e.g. \"--account=a --qos=q\"\n"
		"  --agent-config FILE   agent settings, a YAML mapping of key: value\n"
		"  --agent-opt KEY=VALUE one agent setting (repeatable; wins over the file)\n"
		"  --agent-isolation M   process (default: the plugin runs in a helper process) or inproc\n"
		"  --agent-timeout S     seconds one propose call may take (default 1800; 0: no limit)\n"
		"  --verify-timeout S    seconds one verification may take (default 3600; 0: no limit)\n"
		"  --history-limit N     earlier candidates sent to the agent each round (default 50)\n"
		"  --policy P            policy name or YAML path (as kgate verify)\n"
		"  --backend B           one of: %s (default: a GPU backend when a GPU is present and the\n"
		"                        task has its reference, else cpu); torch asks the agent for KernelBench\n"
		"                        ModelNew modules (a module task only), and a ModelNew an agent proposes\n"
		"                        (.py) for a module task is verified as one whatever the backend\n"
		"  --iterations N        timed iterations per verification (0 skips timing)\n"
		"  --trials N            seeds per input class (overrides the policy)\n"
		"  --seed S              seed handed to the agent (reproducible proposals)\n"
		"  --finalists F         the F fastest accepted are verified and timed again at the end, and\n"
		"                        a winner is named only beyond the measured spread (default 3; 0: off)\n"
		"  --retime R            re-timings of each finalist, interleaved (default 5; 0: off)\n"
		"  --no-cache            compile every candidate, without the compile cache (kgate cache)\n"
		"  --quiet               no progress on stdout\n"
		"agent settings (openai, anthropic): base_url, model, api_key, timeout_s, connect_timeout_s,\n"
		"  max_retries, backoff_ms, backoff_max_ms, retry_after_max_s, max_tokens, temperature; the\n"
		"  environment gives OPENAI_API_KEY / OPENAI_BASE_URL / ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL /\n"
		"  KGATE_MODEL. replay: dir. Keys are never printed or written to the output directory.\n"
		"exit: 0 a winner, 1 no candidate correct, 2 usage or configuration error, 3 infrastructure error\n",
		kg_backend_names());
}

static int parse_int(const char *opt, const char *v, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || !*v || *end || x < lo || x > hi) {
		fprintf(stderr, "kgate search: --%s: expected a number in [%ld, %ld], got '%s'\n", opt, lo, hi, v);
		return -1;
	}
	*out = (int)x;
	return 0;
}

/* Settings from --agent-config: a flat YAML mapping of scalars. Strings are kept in the yaml
 * document, which lives until the search ends. */
static int load_config(kg_yaml *y, const char *path, struct kg_search_opts *o)
{
	kg_error e = {0};
	if (kg_yaml_load(y, path, &e)) {
		fprintf(stderr, "kgate search: --agent-config: %s\n", e.msg);
		return -1;
	}
	yaml_node_t *root = kg_yaml_root(y);
	if (!root || root->type != YAML_MAPPING_NODE) {
		fprintf(stderr, "kgate search: %s: expected a mapping of key: value\n", path);
		return -1;
	}
	for (int i = 0; i < kg_yaml_map_len(root); i++) {
		const char *k = kg_yaml_scalar(kg_yaml_map_key(y, root, i));
		yaml_node_t *vn = kg_yaml_map_val(y, root, i);
		const char *v = kg_yaml_scalar(vn);
		if (!k || !v) {
			/* No value in the message: it might be a key. */
			fprintf(stderr, "kgate search: %s:%d: '%s' must be a plain value\n", path, kg_yaml_line(vn),
				k ? k : "?");
			return -1;
		}
		if (o->n_settings >= KG_SEARCH_MAX_SETTINGS) {
			fprintf(stderr, "kgate search: too many agent settings\n");
			return -1;
		}
		o->keys[o->n_settings] = k;
		o->values[o->n_settings++] = v;
	}
	return 0;
}

/* --template FILE: the tuner's `template` setting, as an absolute path (the agent's helper process
 * and a cluster node resolve it the same way), and the backend its extension is written for. */
static int set_template(const char *path, char *abs, size_t abssz, struct kg_search_opts *o)
{
	size_t n = strlen(path);
	int cuda = n > 3 && !strcmp(path + n - 3, ".cu");
	if (!cuda && !(n > 2 && !strcmp(path + n - 2, ".c"))) {
		fprintf(stderr, "kgate search: --template: %s: expected a .c or .cu file\n", path);
		return -1;
	}
	char *r = realpath(path, NULL);
	if (!r) {
		fprintf(stderr, "kgate search: --template: %s: %s\n", path, strerror(errno));
		return -1;
	}
	snprintf(abs, abssz, "%s", r);
	free(r);
	if (o->n_settings >= KG_SEARCH_MAX_SETTINGS) {
		fprintf(stderr, "kgate search: too many agent settings\n");
		return -1;
	}
	o->keys[o->n_settings] = "template";
	o->values[o->n_settings++] = abs;
	if (!o->backend)
		o->backend = cuda ? "cuda" : "cpu";
	return 0;
}

int kg_cmd_search(int argc, char **argv)
{
	static const struct option opts[] = {
		{"agent", required_argument, 0, 'a'},		{"rounds", required_argument, 0, 'r'},
		{"branch", required_argument, 0, 'b'},		{"candidates", required_argument, 0, 'n'},
		{"keep", required_argument, 0, 'k'},		{"out", required_argument, 0, 'o'},
		{"jobs", required_argument, 0, 'j'},		{"agent-config", required_argument, 0, 'c'},
		{"agent-opt", required_argument, 0, 'O'},	{"agent-isolation", required_argument, 0, 'I'},
		{"agent-timeout", required_argument, 0, 'T'},	{"verify-timeout", required_argument, 0, 'V'},
		{"history-limit", required_argument, 0, 'H'},	{"policy", required_argument, 0, 'p'},
		{"backend", required_argument, 0, 'B'},		{"iterations", required_argument, 0, 'i'},
		{"trials", required_argument, 0, 't'},		{"seed", required_argument, 0, 's'},
		{"quiet", no_argument, 0, 'q'},			{"help", no_argument, 0, 'h'},
		{"template", required_argument, 0, 'M'},	{"finalists", required_argument, 0, 'F'},
		{"retime", required_argument, 0, 'R'},		{"executor", required_argument, 0, 'X'},
		{"slurm-partition", required_argument, 0, 'P'},	{"slurm-args", required_argument, 0, 'S'},
		{"no-cache", no_argument, 0, 'C'},		{"dims", required_argument, 0, 'D'},
		{0, 0, 0, 0},
	};
	struct kg_search_opts o = {
		.rounds = 3,
		.branch = 2,
		.per_idea = 2,
		.keep = 0,
		.agent_timeout_s = 1800,
		.verify_timeout_s = 3600,
		.history_limit = 50,
		.iterations = -1,
		.finalists = 3,
		.retime = 5,
	};
	const char *config = NULL, *template = NULL, *cli_k[KG_SEARCH_MAX_SETTINGS], *cli_v[KG_SEARCH_MAX_SETTINGS];
	int n_cli = 0, ch, rc = KG_EXIT_USAGE, has_seed = 0;
	char outdir[4096], template_abs[4096], *kv_copy[KG_SEARCH_MAX_SETTINGS] = {0};
	kg_yaml y = {0};
	optind = 1;
	while ((ch = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		int bad = 0;
		switch (ch) {
		case 'a':
			o.agent = optarg;
			break;
		case 'r':
			bad = parse_int("rounds", optarg, 1, KG_SEARCH_MAX_ROUNDS, &o.rounds);
			break;
		case 'b':
			bad = parse_int("branch", optarg, 1, KG_SEARCH_MAX_BRANCH, &o.branch);
			break;
		case 'n':
			bad = parse_int("candidates", optarg, 1, KG_SEARCH_MAX_PER_IDEA, &o.per_idea);
			break;
		case 'k':
			bad = parse_int("keep", optarg, 1, KG_SEARCH_MAX_BRANCH * 4, &o.keep);
			break;
		case 'o':
			o.outdir = optarg;
			break;
		case 'j':
			bad = parse_int("jobs", optarg, 1, 256, &o.jobs);
			break;
		case 'c':
			config = optarg;
			break;
		case 'O': {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg) {
				fprintf(stderr, "kgate search: --agent-opt expects KEY=VALUE\n");
				bad = 1;
			} else if (n_cli >= KG_SEARCH_MAX_SETTINGS) {
				fprintf(stderr, "kgate search: too many --agent-opt\n");
				bad = 1;
			} else if (!(kv_copy[n_cli] = strdup(optarg))) {
				bad = 1;
			} else {
				kv_copy[n_cli][eq - optarg] = '\0';
				cli_k[n_cli] = kv_copy[n_cli];
				cli_v[n_cli] = kv_copy[n_cli] + (eq - optarg) + 1;
				n_cli++;
			}
			break;
		}
		case 'I':
			if (!strcmp(optarg, "process"))
				o.isolation = KG_AGENT_PROCESS;
			else if (!strcmp(optarg, "inproc"))
				o.isolation = KG_AGENT_INPROC;
			else {
				fprintf(stderr, "kgate search: --agent-isolation: expected process or inproc, got '%s'\n", optarg);
				bad = 1;
			}
			break;
		case 'T':
			bad = parse_int("agent-timeout", optarg, 0, 86400, &o.agent_timeout_s);
			break;
		case 'V':
			bad = parse_int("verify-timeout", optarg, 0, 86400, &o.verify_timeout_s);
			break;
		case 'H':
			bad = parse_int("history-limit", optarg, 0, 100000, &o.history_limit);
			break;
		case 'p':
			o.policy = optarg;
			break;
		case 'B':
			o.backend = optarg;
			break;
		case 'i':
			bad = parse_int("iterations", optarg, 0, 100000, &o.iterations);
			break;
		case 't':
			bad = parse_int("trials", optarg, 1, 100000, &o.trials);
			break;
		case 's': {
			char *end;
			errno = 0;
			o.seed = strtoull(optarg, &end, 0);
			bad = errno || !*optarg || *end;
			if (bad)
				fprintf(stderr, "kgate search: --seed: not a number: %s\n", optarg);
			has_seed = 1;
			break;
		}
		case 'q':
			o.quiet = 1;
			break;
		case 'M':
			template = optarg;
			break;
		case 'X':
			o.executor = optarg;
			break;
		case 'P':
			o.slurm_partition = optarg;
			break;
		case 'S':
			o.slurm_args = optarg;
			break;
		case 'F':
			bad = parse_int("finalists", optarg, 0, 8, &o.finalists);
			break;
		case 'R':
			bad = parse_int("retime", optarg, 0, 32, &o.retime);
			break;
		case 'C':
			o.no_cache = 1;
			break;
		case 'D':
			o.dims = optarg;
			break;
		case 'h':
			usage(stdout);
			rc = 0;
			goto out;
		default:
			bad = 1;
		}
		if (bad) {
			usage(stderr);
			goto out;
		}
	}
	if (argc - optind != 1 || !o.agent) {
		if (!o.agent)
			fprintf(stderr, "kgate search: --agent is required\n");
		usage(stderr);
		goto out;
	}
	o.task = argv[optind];
	if (!o.keep)
		o.keep = o.branch;
	if (!has_seed)
		o.seed = kg_now_ns() ^ ((uint64_t)getpid() << 32);
	if (!o.outdir) {
		const char *base = strrchr(o.task, '/');
		base = base ? base + 1 : o.task;
		/* PROBLEM.py searches into kgate-search-PROBLEM, as a task named PROBLEM would */
		size_t n = strlen(base);
		int py = n > 3 && !strcmp(base + n - 3, ".py");
		snprintf(outdir, sizeof(outdir), "kgate-search-%.*s", (int)(py ? n - 3 : n), base);
		o.outdir = outdir;
	}
	if (config && load_config(&y, config, &o))
		goto out;
	if (template && set_template(template, template_abs, sizeof(template_abs), &o))
		goto out;
	for (int i = 0; i < n_cli; i++) {
		if (o.n_settings >= KG_SEARCH_MAX_SETTINGS) {
			fprintf(stderr, "kgate search: too many agent settings\n");
			goto out;
		}
		/* Later settings win in the plugins, so the command line goes last. */
		o.keys[o.n_settings] = cli_k[i];
		o.values[o.n_settings++] = cli_v[i];
	}
	kg_error e = {0};
	rc = kg_search(&o, &e);
	if (rc && e.msg[0]) {
		/* it may quote the agent's words or a file of the user's: never raw control bytes */
		char *t = kg_text_safe_dup(e.msg, KG_TEXT_MULTILINE, NULL);
		fprintf(stderr, "kgate search: %s\n", t ? t : "(out of memory)");
		free(t);
	}
out:
	for (int i = 0; i < n_cli; i++)
		free(kv_copy[i]);
	if (y.loaded)
		kg_yaml_free(&y);
	return rc;
}

int kg_cmd_agent_host(int argc, char **argv)
{
	return kg_agent_host_main(argc, argv);
}
