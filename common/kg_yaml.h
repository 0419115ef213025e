/* Thin, strict helpers over libyaml's document API for kgate's manifests and policies: every
 * error names the file, the line and the field, and unknown keys are errors. */
#ifndef KG_YAML_H
#define KG_YAML_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "kg_common.h"

typedef struct kg_yaml {
	yaml_document_t doc;
	int loaded;
	int foreign; /* the file is not the user's: kg_yaml_redact hides its content in errors */
	char path[4096];
} kg_yaml;

/* Parses the file (at most 1 MiB), opened as a user's file (kg_ufile.h: no symbolic links, a
 * regular file, never blocking). Syntax errors come back as "path:line:col: problem". */
int kg_yaml_load(kg_yaml *y, const char *path, kg_error *e);
/* Same; what names the file in messages ("task", "policy"). */
int kg_yaml_load_user(kg_yaml *y, const char *path, const char *what, kg_error *e);
/* After a failed parse or validation of y: a file that is not the user's gets its location only
 * (kg_ufile_redact). Returns e's code. */
int kg_yaml_redact(const kg_yaml *y, kg_error *e);
/* The limits checked before a document is built (common/yaml_limits.c): nesting depth, aliases,
 * one document, the number of values, no key twice in any mapping. "name:line: ..." errors. */
int kg_yaml_check_limits(const char *name, const char *text, size_t len, kg_error *e);
/* Fails with "name:line: 'x' twice" when a list of scalars holds one value twice. */
int kg_yaml_seq_unique(kg_yaml *y, yaml_node_t *seq, const char *field, kg_error *e);
/* Same, from a string; name is used in messages. */
int kg_yaml_load_string(kg_yaml *y, const char *name, const char *text, size_t len, kg_error *e);
void kg_yaml_free(kg_yaml *y);

yaml_node_t *kg_yaml_root(kg_yaml *y);
int kg_yaml_line(const yaml_node_t *n);

/* Fails on any key of map not in allowed (NULL-terminated); ctx names the section. */
int kg_yaml_check_keys(kg_yaml *y, yaml_node_t *map, const char *const *allowed, const char *ctx, kg_error *e);
/* Value node of key in map, NULL when absent (or map is not a mapping). */
yaml_node_t *kg_yaml_get(kg_yaml *y, yaml_node_t *map, const char *key);

int kg_yaml_expect(kg_yaml *y, yaml_node_t *n, yaml_node_type_t type, const char *field, kg_error *e);
/* Scalars. field names the value in messages ("tolerance.atol"). */
int kg_yaml_str(kg_yaml *y, yaml_node_t *n, const char *field, char *out, size_t outsz, kg_error *e);
int kg_yaml_double(kg_yaml *y, yaml_node_t *n, const char *field, double *out, kg_error *e);
int kg_yaml_int(kg_yaml *y, yaml_node_t *n, const char *field, int64_t lo, int64_t hi, int64_t *out, kg_error *e);
int kg_yaml_bool(kg_yaml *y, yaml_node_t *n, const char *field, int *out, kg_error *e);
/* Raw scalar text (NUL-terminated by libyaml's loader) or NULL when n is not a scalar. */
const char *kg_yaml_scalar(const yaml_node_t *n);

int kg_yaml_seq_len(const yaml_node_t *n);
yaml_node_t *kg_yaml_seq_item(kg_yaml *y, yaml_node_t *n, int i);
int kg_yaml_map_len(const yaml_node_t *n);
yaml_node_t *kg_yaml_map_key(kg_yaml *y, yaml_node_t *n, int i);
yaml_node_t *kg_yaml_map_val(kg_yaml *y, yaml_node_t *n, int i);

#endif
