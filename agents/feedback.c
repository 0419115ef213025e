/* What the agent is told: the task (from the manifest, the references and the ABI header) and
 * every earlier result (from the history lines), as kgate.v1 protobuf messages. Everything is
 * allocated from one pool that the caller frees after packing. */
#include "agents/feedback.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/dtype.h"

#define MAX_SOURCE (1u << 20)

/* The one place where the backend vocabulary meets the agent protocol's: a backend added to
 * kg_vocab.h needs a Language in proto/kgate.proto and a row here before this compiles. */
_Static_assert(KG_BACKEND_COUNT_ == 3, "map the new backend to a Kgate__V1__Language below");
static const Kgate__V1__Language languages[KG_BACKEND_COUNT_] = {
	[KG_BACKEND_CPU] = KGATE__V1__LANGUAGE__LANGUAGE_C,
	[KG_BACKEND_CUDA] = KGATE__V1__LANGUAGE__LANGUAGE_CUDA,
	/* a KernelBench ModelNew module, for a task given as a PyTorch module */
	[KG_BACKEND_TORCH] = KGATE__V1__LANGUAGE__LANGUAGE_PYTHON,
};

Kgate__V1__Language kg_feedback_language(enum kg_backend_id id)
{
	return (unsigned)id < KG_BACKEND_COUNT_ ? languages[id] : KGATE__V1__LANGUAGE__LANGUAGE_UNSPECIFIED;
}

void *kg_pool_alloc(struct kg_pool *p, size_t n)
{
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 64;
		void **np = realloc(p->ptrs, nc * sizeof(void *));
		if (!np)
			return NULL;
		p->ptrs = np;
		p->cap = nc;
	}
	void *x = calloc(1, n ? n : 1);
	if (x)
		p->ptrs[p->n++] = x;
	return x;
}

char *kg_pool_strdup(struct kg_pool *p, const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *d = kg_pool_alloc(p, n);
	if (d && s)
		memcpy(d, s, n);
	return d;
}

void kg_pool_free(struct kg_pool *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->ptrs[i]);
	free(p->ptrs);
	memset(p, 0, sizeof(*p));
}

/* A file's text owned by the pool; "" when unreadable (the agent copes with less context). */
static char *pool_file(struct kg_pool *p, const char *path)
{
	char *text = NULL;
	if (!path || !*path || kg_read_file(path, MAX_SOURCE, &text, NULL, NULL))
		return kg_pool_strdup(p, "");
	char *d = kg_pool_strdup(p, text);
	free(text);
	return d;
}

static Kgate__V1__TensorSpec **specs(struct kg_pool *p, const struct kg_tensor_spec *s, int n)
{
	static const char *const roles[] = {"activation", "weight", "bias", "statistic", "variance"};
	Kgate__V1__TensorSpec **v = kg_pool_alloc(p, (size_t)n * sizeof(*v));
	if (!v)
		return NULL;
	for (int i = 0; i < n; i++) {
		Kgate__V1__TensorSpec *t = kg_pool_alloc(p, sizeof(*t));
		char **shape = kg_pool_alloc(p, (size_t)s[i].ndim * sizeof(char *));
		if (!t || !shape)
			return NULL;
		kgate__v1__tensor_spec__init(t);
		t->name = kg_pool_strdup(p, s[i].name);
		t->dtype = kg_pool_strdup(p, kg_dtype_name(s[i].dtype));
		t->role = kg_pool_strdup(p, s[i].role <= KG_ROLE_VARIANCE ? roles[s[i].role] : "");
		for (int k = 0; k < s[i].ndim; k++)
			shape[k] = kg_pool_strdup(p, s[i].dim[k]);
		t->n_shape = (size_t)s[i].ndim;
		t->shape = shape;
		v[i] = t;
	}
	return v;
}

static Kgate__V1__ShapeSet *shapeset(struct kg_pool *p, const char *name, const kg_dims *d)
{
	Kgate__V1__ShapeSet *s = kg_pool_alloc(p, sizeof(*s));
	Kgate__V1__Dim **dims = kg_pool_alloc(p, (size_t)d->n * sizeof(*dims));
	if (!s || !dims)
		return NULL;
	kgate__v1__shape_set__init(s);
	s->name = kg_pool_strdup(p, name);
	for (int i = 0; i < d->n; i++) {
		if (!(dims[i] = kg_pool_alloc(p, sizeof(*dims[i]))))
			return NULL;
		kgate__v1__dim__init(dims[i]);
		dims[i]->name = kg_pool_strdup(p, d->name[i]);
		dims[i]->value = d->val[i];
	}
	s->n_dims = (size_t)d->n;
	s->dims = dims;
	return s;
}

Kgate__V1__Task *kg_feedback_task(struct kg_pool *p, const struct kg_task *t, const struct kg_backend *be,
				  const char *shape_set, int variants, const char *abi_header_path)
{
	Kgate__V1__Task *m = kg_pool_alloc(p, sizeof(*m));
	if (!m)
		return NULL;
	kgate__v1__task__init(m);
	m->name = kg_pool_strdup(p, t->name);
	m->description = kg_pool_strdup(p, t->description);
	/* A task given as a PyTorch module has no task.yaml: its path is the module, which is the
	 * reference below; the manifest it was derived into is only what the fields here say. */
	int module = t->ref[KG_BACKEND_TORCH][0] && !strcmp(t->path, t->ref[KG_BACKEND_TORCH]);
	m->manifest = module ? kg_pool_strdup(p, "") : pool_file(p, t->path);
	/* The proto has one field per reference: the C one (or, for a task derived from a PyTorch
	 * module, the module: its Model is the reference) and the CUDA one. */
	m->reference_source = pool_file(p, t->ref[KG_BACKEND_CPU][0] ? t->ref[KG_BACKEND_CPU] : t->ref[KG_BACKEND_TORCH]);
	m->reference_cuda = pool_file(p, t->ref[KG_BACKEND_CUDA]);
	m->abi_header = pool_file(p, abi_header_path);
	if (!(m->inputs = specs(p, t->inputs, t->n_inputs)) || !(m->outputs = specs(p, t->outputs, t->n_outputs)))
		return NULL;
	m->n_inputs = (size_t)t->n_inputs;
	m->n_outputs = (size_t)t->n_outputs;
	if (!(m->shape_sets = kg_pool_alloc(p, (size_t)t->n_shapesets * sizeof(*m->shape_sets))))
		return NULL;
	for (int i = 0; i < t->n_shapesets; i++)
		if (!(m->shape_sets[i] = shapeset(p, t->shapesets[i].name, &t->shapesets[i].dims)))
			return NULL;
	m->n_shape_sets = (size_t)t->n_shapesets;
	m->shape_set = kg_pool_strdup(p, shape_set);
	m->shape_variants = variants && t->n_variants > 0;
	m->cost_bytes = kg_pool_strdup(p, t->cost_bytes);
	m->cost_flops = kg_pool_strdup(p, t->cost_flops);
	m->atol = t->atol;
	m->rtol = t->rtol;
	m->language = kg_feedback_language(be->id);
	return m;
}

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* A history line's "language" is its backend's source language word, the task manifest's
 * reference key ("c", "cuda"); a line without a known one is C, as the search's first lines were. */
static Kgate__V1__Language line_language(json_t *line)
{
	const char *word = jstr(line, "language");
	for (int i = 0; i < KG_BACKEND_COUNT_; i++)
		if (!strcmp(word, kg_backend_ref_key((enum kg_backend_id)i)))
			return kg_feedback_language((enum kg_backend_id)i);
	return kg_feedback_language(KG_BACKEND_CPU);
}

static Kgate__V1__Reason *reason(struct kg_pool *p, json_t *r)
{
	Kgate__V1__Reason *m = kg_pool_alloc(p, sizeof(*m));
	if (!m)
		return NULL;
	kgate__v1__reason__init(m);
	m->code = kg_pool_strdup(p, jstr(r, "code"));
	m->message = kg_pool_strdup(p, jstr(r, "message"));
	m->input_class = kg_pool_strdup(p, jstr(r, "input_class"));
	m->seed = kg_pool_strdup(p, jstr(r, "seed"));
	m->shape = kg_pool_strdup(p, jstr(r, "shape"));
	m->tensor = kg_pool_strdup(p, jstr(r, "tensor"));
	json_t *idx = json_object_get(r, "index");
	m->index = json_is_integer(idx) ? (int64_t)json_integer_value(idx) : -1;
	json_t *ex = json_object_get(r, "expected"), *got = json_object_get(r, "got");
	if (json_is_number(ex) && json_is_number(got)) {
		m->has_values = 1;
		m->expected = json_number_value(ex);
		m->got = json_number_value(got);
	}
	return m;
}

Kgate__V1__CandidateResult *kg_feedback_result(struct kg_pool *p, const struct kg_rec *r, const char *outdir,
					       int with_source)
{
	Kgate__V1__CandidateResult *m = kg_pool_alloc(p, sizeof(*m));
	if (!m)
		return NULL;
	kgate__v1__candidate_result__init(m);
	json_t *j = r->j;
	m->id = kg_pool_strdup(p, r->id);
	m->round = (uint32_t)r->round;
	m->idea = (uint32_t)r->idea;
	m->idea_text = kg_pool_strdup(p, jstr(j, "idea_text"));
	m->language = line_language(j);
	m->verdict = r->verdict == KG_REC_ACCEPTED   ? KGATE__V1__VERDICT__VERDICT_ACCEPTED
		     : r->verdict == KG_REC_REJECTED ? KGATE__V1__VERDICT__VERDICT_REJECTED
						     : KGATE__V1__VERDICT__VERDICT_ERROR;
	m->compile_log = kg_pool_strdup(p, jstr(j, "compile_log"));
	m->error = kg_pool_strdup(p, jstr(j, "error"));
	if (with_source) {
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", outdir, jstr(j, "file"));
		m->source = pool_file(p, path);
	} else {
		m->source = kg_pool_strdup(p, "");
	}
	json_t *rs = json_object_get(j, "reasons");
	size_t n = json_array_size(rs);
	if (!(m->reasons = kg_pool_alloc(p, n * sizeof(*m->reasons))))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(m->reasons[i] = reason(p, json_array_get(rs, i))))
			return NULL;
	m->n_reasons = n;
	/* r->timed says the line holds the report's timing (history.c); the rest of it is read from
	 * the same object, named as in the report. */
	if (r->timed) {
		json_t *t = json_object_get(j, "timing");
		if (!(m->timing = kg_pool_alloc(p, sizeof(*m->timing))))
			return NULL;
		kgate__v1__timing__init(m->timing);
		m->timed = 1;
		m->timing->median_ms = r->median_ms;
		m->timing->speedup = r->speedup;
		json_t *ref = json_object_get(t, "reference");
		m->timing->reference_median_ms = json_number_value(json_object_get(ref, "median_ms"));
		m->timing->gbps = json_number_value(json_object_get(t, "gbps"));
		m->timing->gflops = json_number_value(json_object_get(t, "gflops"));
		m->timing->roofline = json_number_value(json_object_get(t, "roofline"));
	}
	return m;
}

/* The report's keys a history line carries, copied as they are (docs/report.md): the search's
 * readers (history.c, the agent's messages, winner.json) and anyone reading history.jsonl know
 * one structure, the report's. The rest (checks, durations, sandbox) is in the saved report. */
static const char *const line_keys[] = {"verdict", "exit_code", "reasons", "timing", "compile_log", "error"};

static json_t *error_line(json_t *line, int exit_code, const char *error)
{
	json_object_set_new(line, "verdict", json_string("error"));
	json_object_set_new(line, "exit_code", json_integer(exit_code));
	json_object_set_new(line, "reasons", json_array());
	json_object_set_new(line, "error", json_string(error && *error ? error : "no report"));
	return line;
}

/* A history line from a verification report (or from the reason there is none). */
json_t *kg_feedback_line(const char *report_json, const char *error, int usage)
{
	json_t *line = json_object();
	json_t *rep = report_json ? json_loads(report_json, 0, NULL) : NULL;
	if (!line)
		goto out;
	if (!rep) {
		error_line(line, usage ? KG_EXIT_USAGE : KG_EXIT_INTERNAL, error);
		goto out;
	}
	json_t *code = json_object_get(rep, "exit_code");
	/* Without an exit code a report says nothing about the candidate: never an acceptance. */
	if (!json_is_integer(code)) {
		error_line(line, KG_EXIT_INTERNAL, "the verification report has no exit_code");
		goto out;
	}
	for (size_t i = 0; i < KG_ARRAY_LEN(line_keys); i++) {
		json_t *v = json_object_get(rep, line_keys[i]);
		if (v)
			json_object_set(line, line_keys[i], v);
	}
	/* What every reader relies on, should a report lack it: the word its exit code stands for,
	 * and a (possibly empty) list of reasons. */
	if (!json_is_string(json_object_get(line, "verdict"))) {
		json_int_t c = json_integer_value(code);
		json_object_set_new(line, "verdict", json_string(c == KG_EXIT_ACCEPTED   ? "accepted"
								 : c == KG_EXIT_REJECTED ? "rejected"
											 : "error"));
	}
	if (!json_is_array(json_object_get(line, "reasons")))
		json_object_set_new(line, "reasons", json_array());
out:
	json_decref(rep);
	return line;
}

int kg_feedback_timing_only(const char *report_json)
{
	json_t *r = report_json ? json_loads(report_json, 0, NULL) : NULL;
	json_t *reasons = json_object_get(r, "reasons");
	int only = json_integer_value(json_object_get(r, "exit_code")) == 1 && json_array_size(reasons) > 0;
	for (size_t i = 0; only && i < json_array_size(reasons); i++) {
		const char *code = json_string_value(json_object_get(json_array_get(reasons, i), "code"));
		only = code && !strcmp(code, "timing.tampered");
	}
	json_decref(r);
	return only;
}
