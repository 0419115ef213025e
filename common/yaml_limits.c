/* The limits a manifest or policy must keep before libyaml builds its document: one streaming pass
 * over the parser's events (cheap, bounded memory) refuses what would make the loader or kgate's
 * own walks slow or ambiguous: nesting deeper than 32 levels (libyaml's loader took over 20 minutes
 * on 1 MB of '['), more than 16 aliases (a billion laughs expands through them), more than one
 * document, too many nodes, and a key twice in any mapping at any level. */
#include <errno.h>
#include <string.h>
#include <yaml.h>

#include "kg_yaml.h"

#define MAX_DEPTH 32
#define MAX_ALIASES 16
#define MAX_NODES 20000
#define MAX_KEYS 512 /* per mapping: the duplicate check is quadratic in it */

struct level {
	int is_map, expect_key, n_keys;
	size_t keys_off; /* where this mapping's keys start in the key buffer */
	size_t last_key; /* offset of the key whose value is being read (for messages) */
};

static int line_of(const yaml_event_t *ev)
{
	return (int)ev->start_mark.line + 1;
}

/* The dotted keys leading to level n ("random_shapes.ranges"), as the loaders name fields. */
static void key_path(const struct level *st, int n, const kg_buf *keys, char *out, size_t outsz)
{
	size_t len = 0;
	out[0] = '\0';
	for (int i = 0; i < n && len < outsz; i++)
		if (st[i].is_map && st[i].last_key != (size_t)-1)
			len += (size_t)snprintf(out + len, outsz - len, "%s%s", len ? "." : "", keys->data + st[i].last_key);
}

int kg_yaml_check_limits(const char *name, const char *text, size_t len, kg_error *e)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	struct level st[MAX_DEPTH + 1];
	kg_buf keys = {0};
	int depth = 0, docs = 0, aliases = 0, nodes = 0, rc = 0;
	if (!yaml_parser_initialize(&parser))
		return kg_err(e, -ENOMEM, "%s: cannot initialise the YAML parser", name);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	memset(st, 0, sizeof(st));
	for (int done = 0; !done && !rc;) {
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = kg_err(e, -EINVAL, "%s:%zu:%zu: YAML syntax error: %s%s%s", name, parser.problem_mark.line + 1,
				    parser.problem_mark.column + 1, parser.problem ? parser.problem : "unknown problem",
				    parser.context ? " " : "", parser.context ? parser.context : "");
			break;
		}
		int is_node = ev.type == YAML_SCALAR_EVENT || ev.type == YAML_ALIAS_EVENT ||
			      ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT;
		struct level *top = depth ? &st[depth - 1] : NULL;
		if (ev.type == YAML_STREAM_END_EVENT) {
			done = 1;
		} else if (ev.type == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
			rc = kg_err(e, -EINVAL, "%s:%d: a second document: a kgate file is one YAML document", name,
				    line_of(&ev));
		} else if (is_node && ++nodes > MAX_NODES) {
			rc = kg_err(e, -E2BIG, "%s:%d: more than %d values", name, line_of(&ev), MAX_NODES);
		} else if (ev.type == YAML_ALIAS_EVENT && ++aliases > MAX_ALIASES) {
			rc = kg_err(e, -E2BIG, "%s:%d: more than %d aliases (*name): their expansion is bounded", name,
				    line_of(&ev), MAX_ALIASES);
		} else if (is_node && top && top->is_map && top->expect_key) {
			/* a key: a plain scalar, new in its mapping */
			top->expect_key = 0;
			const char *k = ev.type == YAML_SCALAR_EVENT ? (const char *)ev.data.scalar.value : "";
			if (ev.type != YAML_SCALAR_EVENT) {
				rc = kg_err(e, -EINVAL, "%s:%d: a key must be a plain name, not a list, mapping or alias", name,
					    line_of(&ev));
			} else if (++top->n_keys > MAX_KEYS) {
				rc = kg_err(e, -E2BIG, "%s:%d: more than %d keys in one mapping", name, line_of(&ev),
					    MAX_KEYS);
			} else {
				for (size_t o = top->keys_off; o < keys.len && !rc; o += strlen(keys.data + o) + 1)
					if (!strcmp(keys.data + o, k)) {
						char in[256];
						key_path(st, depth - 1, &keys, in, sizeof(in));
						rc = kg_err(e, -EINVAL, "%s:%d: duplicate key '%s'%s%s%s", name, line_of(&ev),
							    k, in[0] ? " in '" : "", in, in[0] ? "'" : "");
					}
				top->last_key = keys.len;
				if (!rc && (kg_buf_append(&keys, k, strlen(k) + 1)))
					rc = kg_err(e, -ENOMEM, "%s: out of memory", name);
			}
		} else if (is_node && top && top->is_map) {
			top->expect_key = 1; /* the value: the next node at this level is a key again */
		}
		if (!rc && (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)) {
			if (depth >= MAX_DEPTH) {
				rc = kg_err(e, -E2BIG, "%s:%d: nested deeper than %d levels", name, line_of(&ev), MAX_DEPTH);
			} else {
				st[depth] = (struct level){.is_map = ev.type == YAML_MAPPING_START_EVENT,
							   .expect_key = 1,
							   .keys_off = keys.len,
							   .last_key = (size_t)-1};
				depth++;
			}
		} else if (!rc && (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) && depth) {
			depth--;
			keys.len = st[depth].keys_off; /* this mapping's keys are done with */
		}
		yaml_event_delete(&ev);
	}
	kg_buf_free(&keys);
	yaml_parser_delete(&parser);
	return rc;
}
