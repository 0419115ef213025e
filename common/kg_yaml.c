/* Strict YAML access for manifests and policies. The files are user input: sizes are bounded,
 * every type is checked, and messages point at the offending line. */
#include "kg_yaml.h"
#include "kg_ufile.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KG_YAML_MAX (1u << 20)

int kg_yaml_load_string(kg_yaml *y, const char *name, const char *text, size_t len, kg_error *e)
{
	yaml_parser_t parser;
	memset(y, 0, sizeof(*y));
	snprintf(y->path, sizeof(y->path), "%s", name);
	if (len > KG_YAML_MAX)
		return kg_err(e, -EFBIG, "%s: larger than %u bytes", name, KG_YAML_MAX);
	/* the streaming pass first: the loader itself is slow on deep nesting */
	int rc = kg_yaml_check_limits(name, text, len, e);
	if (rc)
		return rc;
	if (!yaml_parser_initialize(&parser))
		return kg_err(e, -ENOMEM, "%s: cannot initialise the YAML parser", name);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &y->doc)) {
		rc = kg_err(e, -EINVAL, "%s:%zu:%zu: YAML syntax error: %s%s%s", name, parser.problem_mark.line + 1,
			    parser.problem_mark.column + 1, parser.problem ? parser.problem : "unknown problem",
			    parser.context ? " " : "", parser.context ? parser.context : "");
		goto out;
	}
	y->loaded = 1;
	if (!yaml_document_get_root_node(&y->doc))
		rc = kg_err(e, -EINVAL, "%s: empty document", name);
out:
	yaml_parser_delete(&parser);
	if (rc)
		kg_yaml_free(y);
	return rc;
}

int kg_yaml_load_user(kg_yaml *y, const char *path, const char *what, kg_error *e)
{
	struct kg_ufile f;
	memset(y, 0, sizeof(*y));
	int rc = kg_ufile_read(path, what, KG_YAML_MAX, &f, e);
	if (rc)
		return rc;
	rc = kg_yaml_load_string(y, path, f.data, f.len, e);
	y->foreign = !f.owned;
	if (rc)
		kg_yaml_redact(y, e);
	kg_ufile_free(&f);
	return rc;
}

int kg_yaml_load(kg_yaml *y, const char *path, kg_error *e)
{
	return kg_yaml_load_user(y, path, "file", e);
}

int kg_yaml_redact(const kg_yaml *y, kg_error *e)
{
	kg_ufile_redact(!y->foreign, y->path, e);
	return e ? e->code : -EINVAL;
}

void kg_yaml_free(kg_yaml *y)
{
	if (y->loaded)
		yaml_document_delete(&y->doc);
	y->loaded = 0;
}

yaml_node_t *kg_yaml_root(kg_yaml *y)
{
	return y->loaded ? yaml_document_get_root_node(&y->doc) : NULL;
}

int kg_yaml_line(const yaml_node_t *n)
{
	return n ? (int)n->start_mark.line + 1 : 0;
}

const char *kg_yaml_scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static const char *type_name(yaml_node_type_t t)
{
	switch (t) {
	case YAML_SCALAR_NODE:
		return "a scalar";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "nothing";
	}
}

int kg_yaml_expect(kg_yaml *y, yaml_node_t *n, yaml_node_type_t type, const char *field, kg_error *e)
{
	if (!n)
		return kg_err(e, -EINVAL, "%s: missing field '%s'", y->path, field);
	if (n->type != type)
		return kg_err(e, -EINVAL, "%s:%d: field '%s': expected %s, got %s", y->path, kg_yaml_line(n), field,
			      type_name(type), type_name(n->type));
	return 0;
}

int kg_yaml_map_len(const yaml_node_t *n)
{
	return n && n->type == YAML_MAPPING_NODE ? (int)(n->data.mapping.pairs.top - n->data.mapping.pairs.start) : 0;
}

yaml_node_t *kg_yaml_map_key(kg_yaml *y, yaml_node_t *n, int i)
{
	return yaml_document_get_node(&y->doc, n->data.mapping.pairs.start[i].key);
}

yaml_node_t *kg_yaml_map_val(kg_yaml *y, yaml_node_t *n, int i)
{
	return yaml_document_get_node(&y->doc, n->data.mapping.pairs.start[i].value);
}

int kg_yaml_seq_len(const yaml_node_t *n)
{
	return n && n->type == YAML_SEQUENCE_NODE ? (int)(n->data.sequence.items.top - n->data.sequence.items.start) : 0;
}

yaml_node_t *kg_yaml_seq_item(kg_yaml *y, yaml_node_t *n, int i)
{
	return yaml_document_get_node(&y->doc, n->data.sequence.items.start[i]);
}

yaml_node_t *kg_yaml_get(kg_yaml *y, yaml_node_t *map, const char *key)
{
	int n = kg_yaml_map_len(map);
	for (int i = 0; i < n; i++) {
		const char *k = kg_yaml_scalar(kg_yaml_map_key(y, map, i));
		if (k && !strcmp(k, key))
			return kg_yaml_map_val(y, map, i);
	}
	return NULL;
}

int kg_yaml_seq_unique(kg_yaml *y, yaml_node_t *seq, const char *field, kg_error *e)
{
	int n = kg_yaml_seq_len(seq);
	for (int i = 1; i < n; i++) {
		yaml_node_t *it = kg_yaml_seq_item(y, seq, i);
		const char *s = kg_yaml_scalar(it);
		for (int j = 0; s && j < i; j++) {
			const char *prev = kg_yaml_scalar(kg_yaml_seq_item(y, seq, j));
			if (prev && !strcmp(prev, s))
				return kg_err(e, -EINVAL, "%s:%d: field '%s': '%s' twice", y->path, kg_yaml_line(it), field, s);
		}
	}
	return 0;
}

int kg_yaml_check_keys(kg_yaml *y, yaml_node_t *map, const char *const *allowed, const char *ctx, kg_error *e)
{
	int rc = kg_yaml_expect(y, map, YAML_MAPPING_NODE, ctx, e);
	if (rc)
		return rc;
	int n = kg_yaml_map_len(map);
	for (int i = 0; i < n; i++) {
		yaml_node_t *kn = kg_yaml_map_key(y, map, i);
		const char *k = kg_yaml_scalar(kn);
		if (!k)
			return kg_err(e, -EINVAL, "%s:%d: in '%s': keys must be plain names", y->path, kg_yaml_line(kn), ctx);
		int ok = 0;
		for (const char *const *a = allowed; *a; a++)
			ok |= !strcmp(*a, k);
		if (!ok) {
			char list[512] = "";
			for (const char *const *a = allowed; *a; a++) {
				size_t l = strlen(list);
				snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", *a);
			}
			return kg_err(e, -EINVAL, "%s:%d: unknown key '%s' in '%s' (allowed: %s)", y->path,
				      kg_yaml_line(kn), k, ctx, list);
		}
		for (int j = 0; j < i; j++) {
			const char *prev = kg_yaml_scalar(kg_yaml_map_key(y, map, j));
			if (prev && !strcmp(prev, k))
				return kg_err(e, -EINVAL, "%s:%d: duplicate key '%s' in '%s'", y->path,
					      kg_yaml_line(kn), k, ctx);
		}
	}
	return 0;
}

int kg_yaml_str(kg_yaml *y, yaml_node_t *n, const char *field, char *out, size_t outsz, kg_error *e)
{
	int rc = kg_yaml_expect(y, n, YAML_SCALAR_NODE, field, e);
	if (rc)
		return rc;
	size_t len = n->data.scalar.length;
	if (len >= outsz)
		return kg_err(e, -EINVAL, "%s:%d: field '%s': longer than %zu characters", y->path, kg_yaml_line(n),
			      field, outsz - 1);
	if (memchr(n->data.scalar.value, '\0', len))
		return kg_err(e, -EINVAL, "%s:%d: field '%s': contains a NUL byte", y->path, kg_yaml_line(n), field);
	memcpy(out, n->data.scalar.value, len);
	out[len] = '\0';
	return 0;
}

int kg_yaml_double(kg_yaml *y, yaml_node_t *n, const char *field, double *out, kg_error *e)
{
	int rc = kg_yaml_expect(y, n, YAML_SCALAR_NODE, field, e);
	if (rc)
		return rc;
	const char *s = kg_yaml_scalar(n);
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v))
		return kg_err(e, -EINVAL, "%s:%d: field '%s': expected a finite number, got '%s'", y->path,
			      kg_yaml_line(n), field, s);
	*out = v;
	return 0;
}

int kg_yaml_int(kg_yaml *y, yaml_node_t *n, const char *field, int64_t lo, int64_t hi, int64_t *out, kg_error *e)
{
	int rc = kg_yaml_expect(y, n, YAML_SCALAR_NODE, field, e);
	if (rc)
		return rc;
	const char *s = kg_yaml_scalar(n);
	char *end = NULL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno)
		return kg_err(e, -EINVAL, "%s:%d: field '%s': expected an integer, got '%s'", y->path,
			      kg_yaml_line(n), field, s);
	if (v < lo || v > hi)
		return kg_err(e, -ERANGE, "%s:%d: field '%s': %lld is outside [%lld, %lld]", y->path, kg_yaml_line(n),
			      field, v, (long long)lo, (long long)hi);
	*out = v;
	return 0;
}

int kg_yaml_bool(kg_yaml *y, yaml_node_t *n, const char *field, int *out, kg_error *e)
{
	int rc = kg_yaml_expect(y, n, YAML_SCALAR_NODE, field, e);
	if (rc)
		return rc;
	const char *s = kg_yaml_scalar(n);
	if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on"))
		*out = 1;
	else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off"))
		*out = 0;
	else
		return kg_err(e, -EINVAL, "%s:%d: field '%s': expected true or false, got '%s'", y->path,
			      kg_yaml_line(n), field, s);
	return 0;
}
