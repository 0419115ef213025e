/* `kgate tasks [--json]`: the tasks kgate finds by name, and `kgate validate FILE...`: a task
 * manifest or a policy checked exactly as verify would load it, without running anything. Both
 * exit 2 on any unknown option or argument. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "kg_text.h"
#include "kg_yaml.h"
#include "policy/policy.h"
#include "verifier/plan/resolve.h"
#include "verifier/plan/task.h"
#include "verifier/judge/verdict.h"

static void tasks_usage(FILE *f)
{
	fprintf(f,
		"usage: kgate tasks [--json]\n"
		"  lists the tasks that kgate verify and kgate search find by name: NAME/task.yaml in the\n"
		"  first of $KGATE_TASKS, $KGATE_HOME/tasks, %s/tasks, ./tasks\n"
		"  --json   a JSON array: name, path, valid, description, shapes (name: dims), error\n",
		KG_DATADIR);
}

/* A manifest's text on a terminal: its own, but never raw control bytes. */
static void put_safe(const char *s)
{
	char *t = kg_text_safe_dup(s, KG_TEXT_ONELINE, NULL);
	fputs(t ? t : "?", stdout);
	free(t);
}

/* One line (or one JSON object) per task; an unreadable manifest is listed as such rather than
 * hidden. The name shown is the directory's, the one kg_resolve_task looks up. */
struct listing {
	json_t *arr; /* --json */
	int valid;
};

static int visit_task(const char *name, const char *path, void *ctx)
{
	struct listing *l = ctx;
	json_t *arr = l->arr;
	struct kg_task *t = calloc(1, sizeof(*t));
	kg_error e = {0};
	if (!t)
		return -ENOMEM;
	int bad = kg_task_load(path, t, &e);
	l->valid += !bad;
	if (arr) {
		json_t *o = json_object();
		char *msg = kg_text_safe_dup(bad ? e.msg : t->description, KG_TEXT_MULTILINE, NULL);
		json_object_set_new(o, "name", json_string(name));
		json_object_set_new(o, "path", json_string(path));
		json_object_set_new(o, "valid", json_boolean(!bad));
		json_object_set_new(o, bad ? "error" : "description", json_string(msg ? msg : ""));
		free(msg);
		if (!bad) {
			json_t *sh = json_object();
			for (int i = 0; i < t->n_shapesets; i++) {
				char dims[128];
				kg_dims_str(&t->shapesets[i].dims, dims, sizeof(dims));
				json_object_set_new(sh, t->shapesets[i].name, json_string(dims));
			}
			json_object_set_new(o, "shapes", sh);
		}
		json_array_append_new(arr, o);
	} else {
		printf("%-16s ", name);
		if (bad) {
			printf("(invalid: ");
			put_safe(e.msg);
			printf(")\n");
		} else {
			char dims[128];
			kg_dims_str(&t->shapesets[0].dims, dims, sizeof(dims));
			put_safe(t->description);
			printf(" [nominal %s]\n", dims);
		}
	}
	free(t);
	return 0;
}

int kg_cmd_tasks(int argc, char **argv)
{
	static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
	int ch, as_json = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch == 'j') {
			as_json = 1;
			continue;
		}
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
	struct listing l = {.arr = as_json ? json_array() : NULL};
	/* The resolver's own walk: what is listed is exactly what a name resolves to. */
	int rc = kg_tasks_each(visit_task, &l);
	if (rc < 0) {
		fprintf(stderr, "kgate tasks: %s\n", strerror(-rc));
		json_decref(l.arr);
		return KG_EXIT_INTERNAL;
	}
	if (l.arr) {
		json_dumpf(l.arr, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
		putchar('\n');
		json_decref(l.arr);
	}
	if (!l.valid) {
		fprintf(stderr, "kgate: no tasks found\n");
		return KG_EXIT_USAGE;
	}
	return 0;
}

static void validate_usage(FILE *f)
{
	fprintf(f, "usage: kgate validate FILE...\n"
		   "  checks each task manifest (kgate_task: 1) or policy (kgate_policy: 1) as kgate verify would\n"
		   "  load it, without compiling or running anything; exit 0 when every file is valid, else 2\n");
}

/* Which kind of file: the version key at the top of the mapping. */
static int file_kind(const char *path, kg_error *e)
{
	kg_yaml y;
	int rc = kg_yaml_load_user(&y, path, "file", e);
	if (rc)
		return rc;
	yaml_node_t *root = kg_yaml_root(&y);
	int kind = kg_yaml_get(&y, root, "kgate_task") ? 1 : kg_yaml_get(&y, root, "kgate_policy") ? 2 : 0;
	kg_yaml_free(&y);
	if (!kind)
		return kg_err(e, -EINVAL, "%s: neither a task (kgate_task: 1) nor a policy (kgate_policy: 1)", path);
	return kind;
}

int kg_cmd_validate(int argc, char **argv)
{
	static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
	int ch, bad = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch == 'h') {
			validate_usage(stdout);
			return 0;
		}
		validate_usage(stderr);
		return KG_EXIT_USAGE;
	}
	if (optind >= argc) {
		validate_usage(stderr);
		return KG_EXIT_USAGE;
	}
	struct kg_task *t = calloc(1, sizeof(*t));
	struct kg_policy *p = calloc(1, sizeof(*p));
	for (int i = optind; t && p && i < argc; i++) {
		kg_error e = {0};
		int kind = file_kind(argv[i], &e), rc = kind < 0 ? kind : 0;
		if (kind == 1 && !(rc = kg_task_load(argv[i], t, &e))) {
			char dims[128];
			kg_dims_str(&t->shapesets[0].dims, dims, sizeof(dims));
			printf("%s: valid: task %s, %d inputs, %d outputs, %d shape sets (nominal %s), %d variants\n",
			       argv[i], t->name, t->n_inputs, t->n_outputs, t->n_shapesets, dims, t->n_variants);
		} else if (kind == 2 && !(rc = kg_policy_load(argv[i], p, &e))) {
			printf("%s: valid: policy, %d trials per class, shape set %s, %s\n", argv[i], p->trials,
			       p->shape_set, p->shapes == KG_SHAPES_VARIANTS ? "with variants" : "nominal only");
		}
		if (rc) {
			char *msg = kg_text_safe_dup(e.msg, KG_TEXT_MULTILINE, NULL);
			fprintf(stderr, "kgate validate: %s\n", msg ? msg : argv[i]);
			free(msg);
			bad++;
		}
	}
	int oom = !t || !p;
	free(t);
	free(p);
	if (oom) {
		fprintf(stderr, "kgate validate: out of memory\n");
		return KG_EXIT_INTERNAL;
	}
	return bad ? KG_EXIT_USAGE : 0;
}
