/* Manifest parsing and validation. A manifest is user input: each field is type-checked, each
 * expression evaluated for every shape set before the task is accepted. */
#include "verifier/plan/task.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kg_ufile.h"
#include "kg_yaml.h"
#include "verifier/plan/dtype.h"

/* Bounds that keep a hostile manifest from asking for absurd allocations. */
#define KG_TASK_MAX_ELEMS (1ll << 34)

static int parse_dims_map(kg_yaml *y, yaml_node_t *n, const struct kg_task *t, const char *field, int partial,
			  kg_dims *out, kg_error *e)
{
	int rc = kg_yaml_expect(y, n, YAML_MAPPING_NODE, field, e);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < kg_yaml_map_len(n); i++) {
		yaml_node_t *k = kg_yaml_map_key(y, n, i);
		const char *name = kg_yaml_scalar(k);
		int known = 0;
		for (int j = 0; name && j < t->n_dims; j++)
			known |= !strcmp(t->dims[j], name);
		if (!known)
			return kg_err(e, -EINVAL, "%s:%d: field '%s': '%s' is not a declared dimension", y->path,
				      kg_yaml_line(k), field, name ? name : "?");
		char sub[128];
		snprintf(sub, sizeof(sub), "%s.%s", field, name);
		int64_t v;
		if ((rc = kg_yaml_int(y, kg_yaml_map_val(y, n, i), sub, 1, 1ll << 32, &v, e)))
			return rc;
		kg_dims_set(out, name, v);
	}
	if (!partial) {
		for (int j = 0; j < t->n_dims; j++) {
			int64_t v;
			if (kg_dims_get(out, t->dims[j], &v))
				return kg_err(e, -EINVAL, "%s:%d: field '%s': dimension '%s' has no value", y->path,
					      kg_yaml_line(n), field, t->dims[j]);
		}
	}
	return 0;
}

static int parse_tensor(kg_yaml *y, yaml_node_t *n, const char *field, struct kg_tensor_spec *s, kg_error *e)
{
	static const char *const keys[] = {"name", "dtype", "shape", "role", "reduction", "terms", "factor", NULL};
	int rc = kg_yaml_check_keys(y, n, keys, field, e);
	if (rc)
		return rc;
	char sub[128], buf[64];
	snprintf(sub, sizeof(sub), "%s.name", field);
	if ((rc = kg_yaml_str(y, kg_yaml_get(y, n, "name"), sub, s->name, sizeof(s->name), e)))
		return rc;
	snprintf(sub, sizeof(sub), "%s.dtype", field);
	yaml_node_t *dn = kg_yaml_get(y, n, "dtype");
	if ((rc = kg_yaml_str(y, dn, sub, buf, sizeof(buf), e)))
		return rc;
	if (kg_dtype_parse(buf, &s->dtype))
		return kg_err(e, -EINVAL, "%s:%d: field '%s': unknown dtype '%s' (f32 f16 bf16 i32 i64 u8 bool)", y->path,
			      kg_yaml_line(dn), sub, buf);
	s->role = KG_ROLE_ACTIVATION;
	yaml_node_t *rn = kg_yaml_get(y, n, "role");
	if (rn) {
		snprintf(sub, sizeof(sub), "%s.role", field);
		if ((rc = kg_yaml_str(y, rn, sub, buf, sizeof(buf), e)))
			return rc;
		if (!strcmp(buf, "weight"))
			s->role = KG_ROLE_WEIGHT;
		else if (!strcmp(buf, "bias"))
			s->role = KG_ROLE_BIAS;
		else if (!strcmp(buf, "statistic"))
			s->role = KG_ROLE_STATISTIC;
		else if (!strcmp(buf, "variance"))
			s->role = KG_ROLE_VARIANCE;
		else if (strcmp(buf, "activation"))
			return kg_err(e, -EINVAL,
				      "%s:%d: field '%s': expected activation, weight, bias, statistic or variance, got '%s'",
				      y->path, kg_yaml_line(rn), sub, buf);
	}
	snprintf(sub, sizeof(sub), "%s.shape", field);
	yaml_node_t *sn = kg_yaml_get(y, n, "shape");
	if ((rc = kg_yaml_expect(y, sn, YAML_SEQUENCE_NODE, sub, e)))
		return rc;
	s->ndim = kg_yaml_seq_len(sn);
	/* [] is a scalar (a loss, a BatchNorm's step count): ndim 0, one element */
	if (s->ndim < 0 || s->ndim > KG_MAX_DIMS)
		return kg_err(e, -EINVAL, "%s:%d: field '%s': between 0 and %d dimensions", y->path, kg_yaml_line(sn),
			      sub, KG_MAX_DIMS);
	for (int i = 0; i < s->ndim; i++) {
		char sub2[160];
		snprintf(sub2, sizeof(sub2), "%s[%d]", sub, i);
		if ((rc = kg_yaml_str(y, kg_yaml_seq_item(y, sn, i), sub2, s->dim[i], sizeof(s->dim[i]), e)))
			return rc;
	}
	yaml_node_t *red = kg_yaml_get(y, n, "reduction");
	if (red) {
		snprintf(sub, sizeof(sub), "%s.reduction", field);
		if (strncmp(field, "outputs", 7))
			return kg_err(e, -EINVAL, "%s:%d: field '%s': only outputs reduce", y->path, kg_yaml_line(red), sub);
		if ((rc = kg_yaml_str(y, red, sub, s->reduction, sizeof(s->reduction), e)))
			return rc;
	}
	yaml_node_t *tn = kg_yaml_get(y, n, "terms");
	if (tn) {
		snprintf(sub, sizeof(sub), "%s.terms", field);
		if ((rc = kg_yaml_str(y, tn, sub, buf, sizeof(buf), e)))
			return rc;
		if (strncmp(field, "outputs", 7) || !red || (strcmp(buf, "abs_inputs") && strcmp(buf, "reference")))
			return kg_err(e, -EINVAL,
				      "%s:%d: field '%s': only an output with a reduction has terms, and the values "
				      "are abs_inputs and reference",
				      y->path, kg_yaml_line(tn), sub);
		if (!kg_dtype_is_float(s->dtype))
			return kg_err(e, -EINVAL, "%s:%d: field '%s': an integer output has no rounding error to bound",
				      y->path, kg_yaml_line(tn), sub);
		s->terms = strcmp(buf, "reference") ? KG_TERMS_ABS_INPUTS : KG_TERMS_REFERENCE;
	}
	yaml_node_t *fn = kg_yaml_get(y, n, "factor");
	if (fn) {
		snprintf(sub, sizeof(sub), "%s.factor", field);
		if ((rc = kg_yaml_str(y, fn, sub, buf, sizeof(buf), e)))
			return rc;
		if (strncmp(field, "outputs", 7) || !red || strcmp(buf, "row") || !kg_dtype_is_float(s->dtype))
			return kg_err(e, -EINVAL,
				      "%s:%d: field '%s': only a float output with a reduction has a factor, and its "
				      "value is row",
				      y->path, kg_yaml_line(fn), sub);
		s->factor_row = 1;
	}
	return 0;
}

static int parse_tensors(kg_yaml *y, yaml_node_t *root, const char *key, struct kg_tensor_spec *arr, int *n,
			 kg_error *e)
{
	yaml_node_t *l = kg_yaml_get(y, root, key);
	int rc = kg_yaml_expect(y, l, YAML_SEQUENCE_NODE, key, e);
	if (rc)
		return rc;
	*n = kg_yaml_seq_len(l);
	if (*n < 1 || *n > KG_MAX_TENSORS)
		return kg_err(e, -EINVAL, "%s:%d: field '%s': between 1 and %d tensors", y->path, kg_yaml_line(l), key,
			      KG_MAX_TENSORS);
	for (int i = 0; i < *n; i++) {
		char field[64];
		snprintf(field, sizeof(field), "%s[%d]", key, i);
		if ((rc = parse_tensor(y, kg_yaml_seq_item(y, l, i), field, &arr[i], e)))
			return rc;
	}
	return 0;
}

static int check_shapes(const struct kg_task *t, const kg_dims *d, const char *what, kg_error *e)
{
	for (int io = 0; io < 2; io++) {
		const struct kg_tensor_spec *arr = io ? t->outputs : t->inputs;
		int n = io ? t->n_outputs : t->n_inputs;
		for (int i = 0; i < n; i++) {
			int64_t shape[KG_MAX_DIMS];
			int rc = kg_task_shape(&arr[i], d, shape, e);
			if (rc)
				return kg_err_wrap(e, rc, "%s: %s '%s' under %s", t->path, io ? "output" : "input",
						   arr[i].name, what);
			if (kg_shape_numel(arr[i].ndim, shape) > KG_TASK_MAX_ELEMS)
				return kg_err(e, -ERANGE, "%s: %s '%s' under %s has more than 2^34 elements", t->path,
					      io ? "output" : "input", arr[i].name, what);
			int64_t red;
			if (io && (rc = kg_task_reduction(&arr[i], d, &red, e)))
				return kg_err_wrap(e, rc, "%s: output '%s' under %s", t->path, arr[i].name, what);
		}
	}
	return 0;
}

int kg_task_check_dims(const struct kg_task *t, const kg_dims *d, const char *what, kg_error *e)
{
	return check_shapes(t, d, what, e);
}

static int dims_equal(const kg_dims *a, const kg_dims *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n; i++) {
		int64_t v;
		if (kg_dims_get(b, a->name[i], &v) || v != a->val[i])
			return 0;
	}
	return 1;
}

/* `random_shapes: {count: N, ranges: {DIM: [lo, hi], ...}}`. Each range must span at least
 * KG_RANDOM_MIN_SPAN sizes, so that the secret draws reach every residue mod 4, 8 and 32. */
static int parse_random(kg_yaml *y, yaml_node_t *n, struct kg_task *t, kg_error *e)
{
	static const char *const keys[] = {"count", "ranges", NULL};
	int64_t count;
	int rc = kg_yaml_check_keys(y, n, keys, "random_shapes", e);
	if (rc || (rc = kg_yaml_int(y, kg_yaml_get(y, n, "count"), "random_shapes.count", 1, KG_MAX_RANDOM_SHAPES,
				    &count, e)))
		return rc;
	t->n_random = (int)count;
	yaml_node_t *r = kg_yaml_get(y, n, "ranges");
	if ((rc = kg_yaml_expect(y, r, YAML_MAPPING_NODE, "random_shapes.ranges", e)))
		return rc;
	if (kg_yaml_map_len(r) < 1 || kg_yaml_map_len(r) > t->n_dims)
		return kg_err(e, -EINVAL, "%s:%d: field 'random_shapes.ranges': between 1 and %d dimensions", y->path,
			      kg_yaml_line(r), t->n_dims);
	for (int i = 0; i < kg_yaml_map_len(r); i++) {
		yaml_node_t *k = kg_yaml_map_key(y, r, i), *v = kg_yaml_map_val(y, r, i);
		const char *name = kg_yaml_scalar(k);
		int known = 0;
		for (int j = 0; name && j < t->n_dims; j++)
			known |= !strcmp(t->dims[j], name);
		for (int j = 0; name && j < t->n_ranges; j++)
			known &= !!strcmp(t->range_dim[j], name);
		if (!known)
			return kg_err(e, -EINVAL, "%s:%d: field 'random_shapes.ranges': '%s' is not a declared dimension "
				      "(or is named twice)", y->path, kg_yaml_line(k), name ? name : "?");
		char sub[96];
		snprintf(sub, sizeof(sub), "random_shapes.ranges.%s", name);
		if ((rc = kg_yaml_expect(y, v, YAML_SEQUENCE_NODE, sub, e)))
			return rc;
		if (kg_yaml_seq_len(v) != 2)
			return kg_err(e, -EINVAL, "%s:%d: field '%s': [lo, hi]", y->path, kg_yaml_line(v), sub);
		int64_t lo, hi;
		if ((rc = kg_yaml_int(y, kg_yaml_seq_item(y, v, 0), sub, 1, 1ll << 32, &lo, e)) ||
		    (rc = kg_yaml_int(y, kg_yaml_seq_item(y, v, 1), sub, 1, 1ll << 32, &hi, e)))
			return rc;
		if (hi - lo + 1 < KG_RANDOM_MIN_SPAN)
			return kg_err(e, -EINVAL, "%s:%d: field '%s': [%lld, %lld] spans fewer than %d sizes (every "
				      "residue mod 32 must be reachable)", y->path, kg_yaml_line(v), sub, (long long)lo,
				      (long long)hi, KG_RANDOM_MIN_SPAN);
		snprintf(t->range_dim[t->n_ranges], KG_SYM_LEN, "%s", name);
		t->range_lo[t->n_ranges] = lo;
		t->range_hi[t->n_ranges++] = hi;
	}
	return 0;
}

static int resolve_ref(kg_yaml *y, yaml_node_t *n, const struct kg_task *t, const char *field, char *out,
		       size_t outsz, kg_error *e)
{
	char rel[PATH_MAX];
	int rc = kg_yaml_str(y, n, field, rel, sizeof(rel), e);
	if (rc)
		return rc;
	/* a file of the task's own directory: a manifest cannot point kgate at /etc/shadow */
	if (rel[0] == '/' || !strcmp(rel, "..") || !strncmp(rel, "../", 3) || strstr(rel, "/../") ||
	    (strlen(rel) >= 3 && !strcmp(rel + strlen(rel) - 3, "/..")))
		return kg_err(e, -EINVAL, "%s:%d: field '%s': a path relative to the task's directory, without '..'",
			      y->path, kg_yaml_line(n), field);
	if (kg_path_join(out, outsz, t->dir, rel))
		return kg_err(e, -ENAMETOOLONG, "%s: field '%s': path too long", y->path, field);
	struct stat st;
	int fd = kg_ufile_open(out, "reference", KG_SOURCE_MAX, &st, e);
	if (fd < 0)
		return kg_err_wrap(e, fd, "%s:%d: field '%s'", y->path, kg_yaml_line(n), field);
	close(fd);
	return 0;
}

/* `reference:` holds one source per backend under the backend's key, and what it links under
 * `<key>_libs`; the keys come from the backend table, the C one is required (or a torch one). */
static int parse_references(kg_yaml *y, yaml_node_t *ref, struct kg_task *t, kg_error *e)
{
	char keys[2 * KG_BACKEND_COUNT_][KG_NAME_LEN];
	const char *key_list[2 * KG_BACKEND_COUNT_ + 1];
	for (int b = 0; b < KG_BACKEND_COUNT_; b++) {
		snprintf(keys[2 * b], KG_NAME_LEN, "%s", kg_backend_ref_key((enum kg_backend_id)b));
		snprintf(keys[2 * b + 1], KG_NAME_LEN, "%s_libs", kg_backend_ref_key((enum kg_backend_id)b));
		key_list[2 * b] = keys[2 * b];
		key_list[2 * b + 1] = keys[2 * b + 1];
	}
	key_list[2 * KG_BACKEND_COUNT_] = NULL;
	int rc = kg_yaml_check_keys(y, ref, key_list, "reference", e);
	for (int b = 0; b < KG_BACKEND_COUNT_ && !rc; b++) {
		char field[64];
		yaml_node_t *src = kg_yaml_get(y, ref, keys[2 * b]);
		snprintf(field, sizeof(field), "reference.%s", keys[2 * b]);
		/* the C reference is required, but for a task whose reference is a PyTorch module */
		if (src || (b == KG_BACKEND_CPU && !kg_yaml_get(y, ref, kg_backend_ref_key(KG_BACKEND_TORCH))))
			rc = resolve_ref(y, src, t, field, t->ref[b], sizeof(t->ref[b]), e);
		yaml_node_t *libs = kg_yaml_get(y, ref, keys[2 * b + 1]);
		if (rc || !libs)
			continue;
		snprintf(field, sizeof(field), "reference.%s", keys[2 * b + 1]);
		if ((rc = kg_yaml_expect(y, libs, YAML_SEQUENCE_NODE, field, e)))
			break;
		if (kg_yaml_seq_len(libs) > 4)
			return kg_err(e, -E2BIG, "%s:%d: field '%s': at most 4", y->path, kg_yaml_line(libs), field);
		for (int i = 0; i < kg_yaml_seq_len(libs) && !rc; i++) {
			yaml_node_t *it = kg_yaml_seq_item(y, libs, i);
			char *lib = t->ref_libs[b][t->n_ref_libs[b]];
			if ((rc = kg_yaml_str(y, it, field, lib, KG_NAME_LEN, e)))
				break;
			for (const char *p = lib; *p; p++)
				if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
					return kg_err(e, -EINVAL, "%s:%d: field '%s': bad library name '%s'", y->path,
						      kg_yaml_line(it), field, lib);
			t->n_ref_libs[b]++;
		}
	}
	return rc;
}

/* `constants`: a module's numbers from get_inputs(), {name, at, type, value} each (struct kg_const):
 * the value a literal of its type, the positions distinct and within the forward's arguments. */
static int parse_consts(kg_yaml *y, yaml_node_t *cn, struct kg_task *t, kg_error *e)
{
	static const char *const keys[] = {"name", "at", "type", "value", NULL};
	int rc = kg_yaml_expect(y, cn, YAML_SEQUENCE_NODE, "constants", e);
	if (rc)
		return rc;
	t->n_consts = kg_yaml_seq_len(cn);
	if (t->n_consts > KG_MAX_CONSTS)
		return kg_err(e, -EINVAL, "%s:%d: field 'constants': at most %d", y->path, kg_yaml_line(cn), KG_MAX_CONSTS);
	for (int i = 0; i < t->n_consts; i++) {
		struct kg_const *c = &t->consts[i];
		yaml_node_t *n = kg_yaml_seq_item(y, cn, i);
		char f[64], sub[80], type[16];
		int64_t at;
		snprintf(f, sizeof(f), "constants[%d]", i);
		if ((rc = kg_yaml_check_keys(y, n, keys, f, e)))
			return rc;
		snprintf(sub, sizeof(sub), "%s.name", f);
		if ((rc = kg_yaml_str(y, kg_yaml_get(y, n, "name"), sub, c->name, sizeof(c->name), e)))
			return rc;
		snprintf(sub, sizeof(sub), "%s.at", f);
		if ((rc = kg_yaml_int(y, kg_yaml_get(y, n, "at"), sub, 0, t->n_inputs + t->n_consts - 1, &at, e)))
			return rc;
		c->at = (int)at;
		for (int k = 0; k < i; k++)
			if (t->consts[k].at == c->at)
				return kg_err(e, -EINVAL, "%s: %s and %s are both argument %d", y->path, t->consts[k].name,
					      c->name, c->at);
		snprintf(sub, sizeof(sub), "%s.type", f);
		yaml_node_t *tn = kg_yaml_get(y, n, "type");
		if ((rc = kg_yaml_str(y, tn, sub, type, sizeof(type), e)))
			return rc;
		snprintf(sub, sizeof(sub), "%s.value", f);
		yaml_node_t *vn = kg_yaml_get(y, n, "value");
		if ((rc = kg_yaml_str(y, vn, sub, c->value, sizeof(c->value), e)))
			return rc;
		char *end = NULL;
		int ok;
		if (!strcmp(type, "int")) {
			c->type = 'i';
			errno = 0;
			(void)strtoll(c->value, &end, 10);
			ok = !errno && end != c->value && !*end;
		} else if (!strcmp(type, "float")) {
			c->type = 'f';
			double d = strtod(c->value, &end);
			ok = end != c->value && !*end && isfinite(d);
		} else if (!strcmp(type, "bool")) {
			c->type = 'b';
			ok = !strcmp(c->value, "true") || !strcmp(c->value, "false");
		} else {
			return kg_err(e, -EINVAL, "%s:%d: field '%s.type': int, float or bool, got '%s'", y->path,
				      kg_yaml_line(tn), f, type);
		}
		if (!ok || strspn(c->value, "0123456789+-.eEtruefals") != strlen(c->value))
			return kg_err(e, -EINVAL, "%s:%d: field '%s': not a finite %s literal: '%s'", y->path,
				      kg_yaml_line(vn), sub, type, c->value);
	}
	return 0;
}

static int parse_task(kg_yaml *y, struct kg_task *t, kg_error *e)
{
	static const char *const keys[] = {"kgate_task", "name", "description", "dims", "shapes", "variants",
					   "random_shapes", "inputs", "outputs", "tolerance", "cost", "reference",
					   "nonfinite", "exclude_classes", "constants", "baseline", NULL};
	yaml_node_t *root = kg_yaml_root(y);
	int rc = kg_yaml_check_keys(y, root, keys, "task", e);
	if (rc)
		return rc;
	int64_t ver;
	if ((rc = kg_yaml_int(y, kg_yaml_get(y, root, "kgate_task"), "kgate_task", 1, 1, &ver, e)))
		return rc;
	yaml_node_t *nn = kg_yaml_get(y, root, "name");
	if ((rc = kg_yaml_str(y, nn, "name", t->name, sizeof(t->name), e)))
		return rc;
	/* it names directories and files (search output, reports): a plain name, never a path */
	if (t->name[0] == '.' || strspn(t->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
					 strlen(t->name))
		return kg_err(e, -EINVAL, "%s:%d: field 'name': a plain name (letters, digits, '_', '-', '.'; no '/', "
				       "not starting with '.'), got '%s'",
			      y->path, kg_yaml_line(nn), t->name);
	yaml_node_t *dn = kg_yaml_get(y, root, "description");
	if (dn && (rc = kg_yaml_str(y, dn, "description", t->description, sizeof(t->description), e)))
		return rc;

	yaml_node_t *dims = kg_yaml_get(y, root, "dims");
	if ((rc = kg_yaml_expect(y, dims, YAML_SEQUENCE_NODE, "dims", e)))
		return rc;
	t->n_dims = kg_yaml_seq_len(dims);
	/* none: a module whose every size is a literal (`dims: []`, `nominal: {}`) */
	if (t->n_dims < 0 || t->n_dims > KG_MAX_SYMS)
		return kg_err(e, -EINVAL, "%s:%d: field 'dims': between 0 and %d names", y->path, kg_yaml_line(dims),
			      KG_MAX_SYMS);
	if ((rc = kg_yaml_seq_unique(y, dims, "dims", e)))
		return rc;
	for (int i = 0; i < t->n_dims; i++) {
		yaml_node_t *it = kg_yaml_seq_item(y, dims, i);
		kg_dims probe = {0};
		if ((rc = kg_yaml_str(y, it, "dims", t->dims[i], sizeof(t->dims[i]), e)))
			return rc;
		if (kg_dims_set(&probe, t->dims[i], 1))
			return kg_err(e, -EINVAL, "%s:%d: field 'dims': '%s' is not a valid name", y->path,
				      kg_yaml_line(it), t->dims[i]);
	}

	yaml_node_t *shapes = kg_yaml_get(y, root, "shapes");
	if ((rc = kg_yaml_expect(y, shapes, YAML_MAPPING_NODE, "shapes", e)))
		return rc;
	if (!kg_yaml_get(y, shapes, "nominal"))
		return kg_err(e, -EINVAL, "%s:%d: field 'shapes': a 'nominal' shape set is required", y->path,
			      kg_yaml_line(shapes));
	if (kg_yaml_map_len(shapes) > KG_MAX_SHAPESETS)
		return kg_err(e, -EINVAL, "%s:%d: field 'shapes': at most %d shape sets", y->path,
			      kg_yaml_line(shapes), KG_MAX_SHAPESETS);
	t->n_shapesets = 1; /* slot 0 is nominal, whatever its position in the file */
	for (int i = 0; i < kg_yaml_map_len(shapes); i++) {
		const char *nm = kg_yaml_scalar(kg_yaml_map_key(y, shapes, i));
		if (!nm || strlen(nm) >= KG_NAME_LEN)
			return kg_err(e, -EINVAL, "%s:%d: field 'shapes': bad shape set name", y->path,
				      kg_yaml_line(kg_yaml_map_key(y, shapes, i)));
		struct kg_shapeset *ss = !strcmp(nm, "nominal") ? &t->shapesets[0] : &t->shapesets[t->n_shapesets++];
		char field[64];
		snprintf(ss->name, sizeof(ss->name), "%s", nm);
		snprintf(field, sizeof(field), "shapes.%s", nm);
		if ((rc = parse_dims_map(y, kg_yaml_map_val(y, shapes, i), t, field, 0, &ss->dims, e)))
			return rc;
	}

	yaml_node_t *vars = kg_yaml_get(y, root, "variants");
	if (vars) {
		if ((rc = kg_yaml_expect(y, vars, YAML_SEQUENCE_NODE, "variants", e)))
			return rc;
		t->n_variants = kg_yaml_seq_len(vars);
		if (t->n_variants > KG_MAX_VARIANTS)
			return kg_err(e, -EINVAL, "%s:%d: field 'variants': at most %d", y->path, kg_yaml_line(vars),
				      KG_MAX_VARIANTS);
		for (int i = 0; i < t->n_variants; i++) {
			char field[64];
			snprintf(field, sizeof(field), "variants[%d]", i);
			if ((rc = parse_dims_map(y, kg_yaml_seq_item(y, vars, i), t, field, 1, &t->variants[i], e)))
				return rc;
		}
	}
	yaml_node_t *rnd = kg_yaml_get(y, root, "random_shapes");
	if (rnd && (rc = parse_random(y, rnd, t, e)))
		return rc;

	if ((rc = parse_tensors(y, root, "inputs", t->inputs, &t->n_inputs, e)) ||
	    (rc = parse_tensors(y, root, "outputs", t->outputs, &t->n_outputs, e)))
		return rc;
	yaml_node_t *cn = kg_yaml_get(y, root, "constants");
	if (cn && (rc = parse_consts(y, cn, t, e)))
		return rc;
	for (int j = 0; j < t->n_outputs; j++)
		for (int i = 0; t->outputs[j].terms == KG_TERMS_ABS_INPUTS && i < t->n_inputs; i++)
			if (!kg_dtype_is_float(t->inputs[i].dtype))
				return kg_err(e, -EINVAL,
					      "%s: output '%s' has terms: abs_inputs, but input '%s' is an integer "
					      "tensor (only floating-point inputs have an absolute value to run on)",
					      y->path, t->outputs[j].name, t->inputs[i].name);

	static const char *const tol_keys[] = {"atol", "rtol", "rms", NULL};
	yaml_node_t *tol = kg_yaml_get(y, root, "tolerance");
	if ((rc = kg_yaml_check_keys(y, tol, tol_keys, "tolerance", e)) ||
	    (rc = kg_yaml_double(y, kg_yaml_get(y, tol, "atol"), "tolerance.atol", &t->atol, e)) ||
	    (rc = kg_yaml_double(y, kg_yaml_get(y, tol, "rtol"), "tolerance.rtol", &t->rtol, e)))
		return rc;
	yaml_node_t *rms = kg_yaml_get(y, tol, "rms");
	if (rms && (rc = kg_yaml_double(y, rms, "tolerance.rms", &t->rms_tol, e)))
		return rc;
	if (t->atol < 0 || t->rtol < 0 || t->rms_tol < 0 || t->atol > 1 || t->rtol > 1 || t->rms_tol > 1)
		return kg_err(e, -ERANGE, "%s:%d: field 'tolerance': atol, rtol and rms must lie in [0, 1]", y->path,
			      kg_yaml_line(tol));

	yaml_node_t *cost = kg_yaml_get(y, root, "cost");
	if (cost) {
		static const char *const cost_keys[] = {"bytes", "flops", NULL};
		if ((rc = kg_yaml_check_keys(y, cost, cost_keys, "cost", e)))
			return rc;
		yaml_node_t *b = kg_yaml_get(y, cost, "bytes"), *f = kg_yaml_get(y, cost, "flops");
		if (b && (rc = kg_yaml_str(y, b, "cost.bytes", t->cost_bytes, sizeof(t->cost_bytes), e)))
			return rc;
		if (f && (rc = kg_yaml_str(y, f, "cost.flops", t->cost_flops, sizeof(t->cost_flops), e)))
			return rc;
	}

	if ((rc = parse_references(y, kg_yaml_get(y, root, "reference"), t, e)))
		return rc;
	yaml_node_t *bl = kg_yaml_get(y, root, "baseline");
	/* a task whose reference is a PyTorch module (imported from one) is its own torch baseline */
	if (!bl && t->ref[KG_BACKEND_TORCH][0])
		snprintf(t->baseline_torch, sizeof(t->baseline_torch), "%s", t->ref[KG_BACKEND_TORCH]);
	if (bl) {
		static const char *const bl_keys[] = {"torch", NULL};
		if ((rc = kg_yaml_check_keys(y, bl, bl_keys, "baseline", e)) ||
		    (rc = resolve_ref(y, kg_yaml_get(y, bl, "torch"), t, "baseline.torch", t->baseline_torch,
				      sizeof(t->baseline_torch), e)))
			return rc;
	}

	yaml_node_t *nf = kg_yaml_get(y, root, "nonfinite");
	if (nf && (rc = kg_yaml_bool(y, nf, "nonfinite", &t->nonfinite, e)))
		return rc;

	yaml_node_t *ex = kg_yaml_get(y, root, "exclude_classes");
	if (ex) {
		if ((rc = kg_yaml_expect(y, ex, YAML_SEQUENCE_NODE, "exclude_classes", e)) ||
		    (rc = kg_yaml_seq_unique(y, ex, "exclude_classes", e)))
			return rc;
		for (int i = 0; i < kg_yaml_seq_len(ex); i++) {
			yaml_node_t *it = kg_yaml_seq_item(y, ex, i);
			char nm[32];
			enum kg_input_class c;
			if ((rc = kg_yaml_str(y, it, "exclude_classes", nm, sizeof(nm), e)))
				return rc;
			if (kg_class_parse(nm, &c))
				return kg_err(e, -EINVAL, "%s:%d: field 'exclude_classes': unknown class '%s'", y->path,
					      kg_yaml_line(it), nm);
			t->classes_excluded |= 1u << c;
		}
	}

	/* Every shape must evaluate now, not halfway through a verification. */
	for (int i = 0; i < t->n_shapesets; i++) {
		char what[64];
		snprintf(what, sizeof(what), "shape set '%s'", t->shapesets[i].name);
		if ((rc = check_shapes(t, &t->shapesets[i].dims, what, e)))
			return rc;
		for (int v = 0; v < t->n_variants; v++) {
			kg_dims d;
			kg_task_variant_dims(t, &t->shapesets[i].dims, v, &d);
			snprintf(what, sizeof(what), "variant %d over '%s'", v, t->shapesets[i].name);
			if ((rc = check_shapes(t, &d, what, e)))
				return rc;
			/* a variant that changes nothing tests nothing, and looks like coverage */
			if (dims_equal(&d, &t->shapesets[i].dims))
				return kg_err(e, -EINVAL, "%s: field 'variants[%d]': equals shape set '%s' (a variant "
					      "must change the base shape)", t->path, v, t->shapesets[i].name);
		}
		/* the corners of the random ranges: all low, all high */
		for (int c = 0; c < 2 && t->n_random; c++) {
			kg_dims d = t->shapesets[i].dims;
			for (int k = 0; k < t->n_ranges; k++)
				kg_dims_set(&d, t->range_dim[k], c ? t->range_hi[k] : t->range_lo[k]);
			snprintf(what, sizeof(what), "random_shapes (%s ends) over '%s'", c ? "high" : "low",
				 t->shapesets[i].name);
			if ((rc = check_shapes(t, &d, what, e)))
				return rc;
		}
		const char *formulas[2] = {t->cost_bytes, t->cost_flops};
		for (int f = 0; f < 2; f++) {
			if (!formulas[f][0])
				continue;
			char msg[256];
			int64_t v;
			if (kg_expr_eval(formulas[f], &t->shapesets[i].dims, &v, msg, sizeof(msg)))
				return kg_err(e, -EINVAL, "%s: field 'cost.%s': %s", t->path, f ? "flops" : "bytes",
					      msg);
		}
	}
	return 0;
}

int kg_task_load(const char *path, struct kg_task *t, kg_error *e)
{
	kg_yaml y;
	memset(t, 0, sizeof(*t));
	/* opened as given first (no link anywhere on the path), so realpath has none to resolve */
	int rc = kg_yaml_load_user(&y, path, "task", e);
	if (rc)
		return rc;
	char *abs = realpath(path, NULL);
	if (!abs) {
		rc = kg_err(e, -errno, "task %s: %s", path, strerror(errno));
		goto out;
	}
	snprintf(t->path, sizeof(t->path), "%s", abs);
	snprintf(y.path, sizeof(y.path), "%s", abs);
	kg_dirname(abs, t->dir, sizeof(t->dir));
	free(abs);
	if ((rc = parse_task(&y, t, e)))
		kg_yaml_redact(&y, e);
out:
	kg_yaml_free(&y);
	return rc;
}

const struct kg_shapeset *kg_task_shapeset(const struct kg_task *t, const char *name)
{
	for (int i = 0; i < t->n_shapesets; i++)
		if (!strcmp(t->shapesets[i].name, name))
			return &t->shapesets[i];
	return NULL;
}

void kg_task_variant_dims(const struct kg_task *t, const kg_dims *base, int i, kg_dims *out)
{
	*out = *base;
	const kg_dims *v = &t->variants[i];
	for (int j = 0; j < v->n; j++)
		kg_dims_set(out, v->name[j], v->val[j]);
}

int kg_task_shape(const struct kg_tensor_spec *s, const kg_dims *d, int64_t shape[KG_MAX_DIMS], kg_error *e)
{
	for (int i = 0; i < s->ndim; i++) {
		char msg[256];
		int rc = kg_expr_eval(s->dim[i], d, &shape[i], msg, sizeof(msg));
		if (rc)
			return kg_err(e, rc, "dimension %d: %s", i, msg);
		if (shape[i] < 1 || shape[i] > (1ll << 32))
			return kg_err(e, -ERANGE, "dimension %d ('%s') is %lld, outside [1, 2^32]", i, s->dim[i],
				      (long long)shape[i]);
	}
	return 0;
}

int kg_task_reduction(const struct kg_tensor_spec *s, const kg_dims *d, int64_t *n, kg_error *e)
{
	char msg[256];
	*n = 1;
	if (!s->reduction[0])
		return 0;
	int rc = kg_expr_eval(s->reduction, d, n, msg, sizeof(msg));
	if (rc)
		return kg_err(e, rc, "reduction: %s", msg);
	/* 2^40 terms: beyond any tensor kgate allocates (the growth term is capped long before) */
	if (*n < 1 || *n > (1ll << 40))
		return kg_err(e, -ERANGE, "reduction ('%s') is %lld, outside [1, 2^40]", s->reduction, (long long)*n);
	return 0;
}

int64_t kg_shape_numel(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int i = 0; i < ndim; i++) {
		if (__builtin_mul_overflow(n, shape[i], &n))
			return INT64_MAX;
	}
	return n;
}

int kg_task_cost(const struct kg_task *t, const char *formula, const kg_dims *d, double *out)
{
	(void)t;
	if (!formula[0])
		return -ENOENT;
	int64_t v;
	char msg[128];
	int rc = kg_expr_eval(formula, d, &v, msg, sizeof(msg));
	if (rc)
		return rc;
	*out = (double)v;
	return 0;
}

void kg_dims_str(const kg_dims *d, char *out, size_t outsz)
{
	size_t len = 0;
	out[0] = '\0';
	for (int i = 0; i < d->n && len < outsz; i++)
		len += (size_t)snprintf(out + len, outsz - len, "%s%s=%lld", i ? " " : "", d->name[i],
					(long long)d->val[i]);
}
