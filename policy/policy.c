/* Policy loading and queries. Every key is checked against the schema, so a typo in a team's
 * policy fails loudly instead of silently weakening the gate. */
#include "policy/policy.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_yaml.h"
#include "sandbox/sandbox.h"

/* What a numeric kernel legitimately needs from libc/libm/libgomp; everything else (dlsym,
 * mprotect, ptrace, syscall, socket, fork, fopen...) is refused unless a policy adds it. */
static const char *const default_symbols[] = {
	"memcpy", "memmove", "memset", "memcmp", "__memcpy_chk", "__memset_chk", "__memmove_chk",
	"malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign",
	"__stack_chk_fail", "__cxa_finalize", "__gmon_start__", "_ITM_*", "__assert_fail",
	"exp", "expf", "exp2", "exp2f", "expm1", "expm1f", "log", "logf", "log2", "log2f", "log1p", "log1pf",
	"log10", "log10f", "sqrt", "sqrtf", "cbrt", "cbrtf", "pow", "powf", "fabs", "fabsf", "fmax", "fmaxf",
	"fmin", "fminf", "fma", "fmaf", "floor", "floorf", "ceil", "ceilf", "round", "roundf", "lround",
	"lroundf", "trunc", "truncf", "rint", "rintf", "tanh", "tanhf", "sinh", "sinhf", "cosh", "coshf",
	"sin", "sinf", "cos", "cosf", "tan", "tanf", "atan", "atanf", "atan2", "atan2f", "erf", "erff",
	"erfc", "erfcf", "ldexp", "ldexpf", "frexp", "frexpf", "fmod", "fmodf", "__*_finite", "nan", "nanf",
	"__isnan", "__isnanf", "__isinf", "__isinff", "__fpclassify", "__fpclassifyf", NULL,
};

static const char *const thread_symbols[] = {
	"pthread_create", "pthread_join", "pthread_barrier_*", "pthread_mutex_*", "pthread_cond_*",
	"pthread_attr_*", "GOMP_*", "omp_*",
	/* how many CPUs a threaded kernel may use (CPU_COUNT is __sched_cpucount): read-only */
	"sched_getaffinity", "__sched_cpucount", NULL,
};

static const char *const default_flags[] = {
	"-O1", "-O2", "-O3", "-Ofast", "-ffast-math", "-funroll-loops", "-march=native", "-mtune=native",
	"-mavx", "-mavx2", "-mfma", "-mavx512f", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
	"-use_fast_math", "-lineinfo", "--use_fast_math", "-Xptxas=-v", "--ftz=true", "--ftz=false",
	"--prec-div=true", "--prec-sqrt=true", "--fmad=true", "--fmad=false", NULL,
};

static const char *const default_libraries[] = {
	"libc.so.*", "libm.so.*", "libgcc_s.so.*", "ld-linux*", "libmvec.so.*", NULL,
};

static const char *const thread_libraries[] = {"libgomp.so.*", "libpthread.so.*", NULL};

static void list_set(char (*dst)[64], int *n, int max, const char *const *src)
{
	*n = 0;
	for (; *src && *n < max; src++)
		snprintf(dst[(*n)++], 64, "%s", *src);
}

void kg_policy_defaults(struct kg_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->atol = p->rtol = -1;
	p->precision = KG_PREC_FP32;
	p->growth = 0.25; /* honest fp32 softmax rows measured at 0.07 of n*u (policy/SCHEMA.md) */
	p->trials = 2;
	p->classes = KG_CLASS_ALL;
	p->shapes = KG_SHAPES_VARIANTS;
	snprintf(p->shape_set, sizeof(p->shape_set), "nominal");
	p->async_delay_ms = 50;
	p->warmup = 3;
	p->iterations = 20;
	p->min_speedup = 0;
	p->max_spread = 0.10;
	p->wall_s = 120;
	p->memory_bytes = 8ull << 30;
	p->cpu_s = 600;
	p->nproc = 64;
	p->required_layers = KG_SB_LAYER_SECCOMP | KG_SB_LAYER_NO_NEW_PRIVS | KG_SB_LAYER_RLIMITS;
	p->threads = 0;
	p->gpu_memory_bytes = 8ull << 30;
	p->gpu_tensor_maps = 1;
	p->gpu_driver_entry_points = 0;
	list_set(p->symbols, &p->n_symbols, KG_POLICY_MAX_LIST, default_symbols);
	list_set(p->flags, &p->n_flags, 64, default_flags);
	list_set(p->libraries, &p->n_libraries, 32, default_libraries);
}

const char *kg_module_mode_name(enum kg_module_mode m)
{
	static const char *const names[] = {"problem", "train", "eval"};
	return (unsigned)m < 3 ? names[m] : "problem";
}

const char *kg_precision_name(enum kg_precision p)
{
	static const char *const names[] = {"fp32", "tf32", "fp16", "bf16"};
	return (unsigned)p < 4 ? names[p] : "?";
}

void kg_policy_tolerance(const struct kg_policy *p, double task_atol, double task_rtol, double task_rms, double *atol,
			 double *rtol, double *rms)
{
	double a = p->atol >= 0 ? p->atol : task_atol;
	double r = p->rtol >= 0 ? p->rtol : task_rtol;
	/* Lower precision: the relative bound is floored at the format's few-ulps error, and the
	 * absolute one scaled by the same factor, so near-zero outputs keep a proportionate bound. */
	static const double rfloor[] = {0, 2e-3, 5e-3, 1.6e-2};
	static const double ascale[] = {1, 10, 30, 100};
	if (r < rfloor[p->precision])
		r = rfloor[p->precision];
	a *= ascale[p->precision];
	*atol = a;
	*rtol = r;
	*rms = task_rms < rfloor[p->precision] ? rfloor[p->precision] : task_rms;
}

double kg_policy_growth_cap(const struct kg_policy *p)
{
	/* fp32: a quarter of bf16's unit roundoff (2^-8), not half of fp16's (2^-11): honest fp32
	 * softmax rows of 65536 are off by 2.7e-4, half an fp16 rounding (policy/SCHEMA.md). tf32 and
	 * fp16: half of bf16's; bf16: half of fp8 e4m3's (2^-4). */
	static const double cap[] = {1.0 / 1024, 1.0 / 512, 1.0 / 512, 1.0 / 32};
	return (unsigned)p->precision < 4 ? cap[p->precision] : cap[0];
}

static int glob_any(const char *const *globs, const char *s)
{
	for (; *globs; globs++)
		if (!fnmatch(*globs, s, 0))
			return 1;
	return 0;
}

int kg_policy_symbol_allowed(const struct kg_policy *p, const char *sym)
{
	for (int i = 0; i < p->n_symbols; i++)
		if (!fnmatch(p->symbols[i], sym, 0))
			return 1;
	return p->threads && glob_any(thread_symbols, sym);
}

/* The driver's tensor-map encoders: cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col(Wide) and
 * cuTensorMapReplaceAddress (cuda.h, CUDA 12+), host functions of libcuda that write a descriptor
 * into the caller's memory and touch no device state. */
static const char *const tensor_map_symbols[] = {"cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col",
						 "cuTensorMapEncodeIm2colWide", "cuTensorMapReplaceAddress", NULL};

int kg_policy_gpu_symbol_allowed(const struct kg_policy *p, const char *sym)
{
	if (p->gpu_tensor_maps && glob_any(tensor_map_symbols, sym))
		return 1;
	return p->gpu_driver_entry_points && !fnmatch("cudaGetDriverEntryPoint*", sym, 0);
}

int kg_policy_library_allowed(const struct kg_policy *p, const char *lib)
{
	for (int i = 0; i < p->n_libraries; i++)
		if (!fnmatch(p->libraries[i], lib, 0))
			return 1;
	return p->threads && glob_any(thread_libraries, lib);
}

int kg_policy_flag_allowed(const struct kg_policy *p, const char *flag)
{
	for (int i = 0; i < p->n_flags; i++)
		if (!strcmp(p->flags[i], flag))
			return 1;
	return 0;
}

static int parse_list(kg_yaml *y, yaml_node_t *n, const char *field, char (*dst)[64], int *count, int max,
		      kg_error *e)
{
	int rc = kg_yaml_expect(y, n, YAML_SEQUENCE_NODE, field, e);
	if (rc)
		return rc;
	if (kg_yaml_seq_len(n) > max)
		return kg_err(e, -E2BIG, "%s:%d: field '%s': at most %d entries", y->path, kg_yaml_line(n), field, max);
	if ((rc = kg_yaml_seq_unique(y, n, field, e)))
		return rc;
	*count = 0;
	for (int i = 0; i < kg_yaml_seq_len(n); i++)
		if ((rc = kg_yaml_str(y, kg_yaml_seq_item(y, n, i), field, dst[(*count)++], 64, e)))
			return rc;
	return 0;
}

/* false, true (memcheck alone) or a list of tools, each one sanitized run */
static int parse_sanitizer(kg_yaml *y, yaml_node_t *n, unsigned *out, kg_error *e)
{
	const char *field = "gpu.compute_sanitizer";
	int on = 0, rc;
	if (n->type != YAML_SEQUENCE_NODE) {
		if ((rc = kg_yaml_bool(y, n, field, &on, e)))
			return kg_err(e, rc, "%s:%d: field '%s': true, false or a list of %s", y->path, kg_yaml_line(n),
				      field, kg_sanitizer_tool_names());
		*out = on ? 1u << KG_SAN_MEMCHECK : 0;
		return 0;
	}
	*out = 0;
	if ((rc = kg_yaml_seq_unique(y, n, field, e)))
		return rc;
	for (int i = 0; i < kg_yaml_seq_len(n); i++) {
		yaml_node_t *item = kg_yaml_seq_item(y, n, i);
		char name[32];
		if ((rc = kg_yaml_str(y, item, field, name, sizeof(name), e)))
			return rc;
		enum kg_sanitizer_tool k;
		if (kg_sanitizer_tool_parse(name, &k))
			return kg_err(e, -EINVAL, "%s:%d: field '%s': unknown tool '%s' (%s)", y->path, kg_yaml_line(item),
				      field, name, kg_sanitizer_tool_names());
		*out |= 1u << k;
	}
	return 0;
}

/* A tolerance value may be a number or the word "task". */
static int parse_tol(kg_yaml *y, yaml_node_t *n, const char *field, double *out, kg_error *e)
{
	const char *s = kg_yaml_scalar(n);
	if (s && !strcmp(s, "task")) {
		*out = -1;
		return 0;
	}
	int rc = kg_yaml_double(y, n, field, out, e);
	if (!rc && (*out < 0 || *out > 1))
		rc = kg_err(e, -ERANGE, "%s:%d: field '%s': must lie in [0, 1] or be 'task'", y->path, kg_yaml_line(n),
			    field);
	return rc;
}

static int parse_choice(kg_yaml *y, yaml_node_t *n, const char *field, const char *const *choices, int *out,
			kg_error *e)
{
	char buf[32];
	int rc = kg_yaml_str(y, n, field, buf, sizeof(buf), e);
	if (rc)
		return rc;
	for (int i = 0; choices[i]; i++) {
		if (!strcmp(choices[i], buf)) {
			*out = i;
			return 0;
		}
	}
	return kg_err(e, -EINVAL, "%s:%d: field '%s': '%s' is not one of the allowed values", y->path,
		      kg_yaml_line(n), field, buf);
}

static int get_int(kg_yaml *y, yaml_node_t *map, const char *key, const char *field, int64_t lo, int64_t hi,
		   int64_t *out, kg_error *e)
{
	yaml_node_t *n = kg_yaml_get(y, map, key);
	return n ? kg_yaml_int(y, n, field, lo, hi, out, e) : 0;
}

static int get_double(kg_yaml *y, yaml_node_t *map, const char *key, const char *field, double lo, double hi,
		      double *out, kg_error *e)
{
	yaml_node_t *n = kg_yaml_get(y, map, key);
	if (!n)
		return 0;
	int rc = kg_yaml_double(y, n, field, out, e);
	if (!rc && (*out < lo || *out > hi))
		rc = kg_err(e, -ERANGE, "%s:%d: field '%s': %g is outside [%g, %g]", y->path, kg_yaml_line(n), field,
			    *out, lo, hi);
	return rc;
}

static int parse_policy(kg_yaml *y, struct kg_policy *p, kg_error *e)
{
	static const char *const top[] = {"kgate_policy", "tolerance", "trials", "classes", "shapes", "shape_set",
					  "async_delay_ms", "module_mode", "timing", "sandbox", "symbols", "compile",
					  "gpu", NULL};
	yaml_node_t *root = kg_yaml_root(y), *n;
	int rc = kg_yaml_check_keys(y, root, top, "policy", e);
	int64_t v;
	if (rc)
		return rc;
	if ((rc = kg_yaml_int(y, kg_yaml_get(y, root, "kgate_policy"), "kgate_policy", 1, 1, &v, e)))
		return rc;

	if ((n = kg_yaml_get(y, root, "tolerance"))) {
		static const char *const keys[] = {"precision", "atol", "rtol", "growth", NULL};
		static const char *const precs[] = {"fp32", "tf32", "fp16", "bf16", NULL};
		int prec = 0;
		if ((rc = kg_yaml_check_keys(y, n, keys, "tolerance", e)))
			return rc;
		yaml_node_t *m;
		if ((m = kg_yaml_get(y, n, "precision"))) {
			if ((rc = parse_choice(y, m, "tolerance.precision", precs, &prec, e)))
				return rc;
			p->precision = (enum kg_precision)prec;
		}
		if ((m = kg_yaml_get(y, n, "atol")) && (rc = parse_tol(y, m, "tolerance.atol", &p->atol, e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "rtol")) && (rc = parse_tol(y, m, "tolerance.rtol", &p->rtol, e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "growth"))) {
			if ((rc = kg_yaml_double(y, m, "tolerance.growth", &p->growth, e)))
				return rc;
			if (!(p->growth >= 0 && p->growth <= 4))
				return kg_err(e, -ERANGE, "%s:%d: field 'tolerance.growth': must lie in [0, 4]", y->path,
					      kg_yaml_line(m));
		}
	}
	if ((rc = get_int(y, root, "trials", "trials", 1, 100, &v, e)))
		return rc;
	if (kg_yaml_get(y, root, "trials"))
		p->trials = (int)v;
	if ((n = kg_yaml_get(y, root, "classes"))) {
		char names[KG_CLASS_COUNT_ * 2][64];
		int cnt = 0;
		if ((rc = parse_list(y, n, "classes", names, &cnt, KG_CLASS_COUNT_ * 2, e)))
			return rc;
		if (!cnt)
			return kg_err(e, -EINVAL, "%s:%d: field 'classes': at least one input class", y->path,
				      kg_yaml_line(n));
		p->classes = 0;
		for (int i = 0; i < cnt; i++) {
			enum kg_input_class c;
			if (kg_class_parse(names[i], &c))
				return kg_err(e, -EINVAL, "%s:%d: field 'classes': unknown class '%s' (%s)", y->path,
					      kg_yaml_line(kg_yaml_seq_item(y, n, i)), names[i], kg_class_names());
			p->classes |= 1u << c;
		}
		if (!(p->classes & (1u << KG_CLASS_NORMAL)))
			return kg_err(e, -EINVAL, "%s:%d: field 'classes': 'normal' is required (timing uses it)",
				      y->path, kg_yaml_line(n));
	}
	if ((n = kg_yaml_get(y, root, "shapes"))) {
		static const char *const modes[] = {"nominal", "variants", NULL};
		int m;
		if ((rc = parse_choice(y, n, "shapes", modes, &m, e)))
			return rc;
		p->shapes = (enum kg_shape_mode)m;
	}
	if ((n = kg_yaml_get(y, root, "shape_set")) &&
	    (rc = kg_yaml_str(y, n, "shape_set", p->shape_set, sizeof(p->shape_set), e)))
		return rc;
	if ((rc = get_double(y, root, "async_delay_ms", "async_delay_ms", 0, 10000, &p->async_delay_ms, e)))
		return rc;
	if ((n = kg_yaml_get(y, root, "module_mode"))) {
		static const char *const modes[] = {"problem", "train", "eval", NULL};
		int m;
		if ((rc = parse_choice(y, n, "module_mode", modes, &m, e)))
			return rc;
		p->module_mode = (enum kg_module_mode)m;
	}

	if ((n = kg_yaml_get(y, root, "timing"))) {
		static const char *const keys[] = {"warmup", "iterations", "min_speedup", "max_spread", NULL};
		if ((rc = kg_yaml_check_keys(y, n, keys, "timing", e)))
			return rc;
		if ((rc = get_int(y, n, "warmup", "timing.warmup", 0, 1000, &v, e)))
			return rc;
		if (kg_yaml_get(y, n, "warmup"))
			p->warmup = (int)v;
		if ((rc = get_int(y, n, "iterations", "timing.iterations", 0, 10000, &v, e)))
			return rc;
		if (kg_yaml_get(y, n, "iterations"))
			p->iterations = (int)v;
		if ((rc = get_double(y, n, "min_speedup", "timing.min_speedup", 0, 1e6, &p->min_speedup, e)) ||
		    (rc = get_double(y, n, "max_spread", "timing.max_spread", 0, 100, &p->max_spread, e)))
			return rc;
	}
	if ((n = kg_yaml_get(y, root, "sandbox"))) {
		static const char *const keys[] = {"wall_seconds", "memory_mb", "cpu_seconds", "max_processes",
						   "required_layers", "threads", NULL};
		if ((rc = kg_yaml_check_keys(y, n, keys, "sandbox", e)))
			return rc;
		if ((rc = get_double(y, n, "wall_seconds", "sandbox.wall_seconds", 0.1, 86400, &p->wall_s, e)))
			return rc;
		if ((rc = get_int(y, n, "memory_mb", "sandbox.memory_mb", 16, 1 << 24, &v, e)))
			return rc;
		if (kg_yaml_get(y, n, "memory_mb"))
			p->memory_bytes = (uint64_t)v << 20;
		if ((rc = get_int(y, n, "cpu_seconds", "sandbox.cpu_seconds", 1, 86400, &v, e)))
			return rc;
		if (kg_yaml_get(y, n, "cpu_seconds"))
			p->cpu_s = (uint32_t)v;
		if ((rc = get_int(y, n, "max_processes", "sandbox.max_processes", 1, 4096, &v, e)))
			return rc;
		if (kg_yaml_get(y, n, "max_processes"))
			p->nproc = (uint32_t)v;
		yaml_node_t *m;
		if ((m = kg_yaml_get(y, n, "required_layers"))) {
			char names[KG_SB_LAYER_COUNT_ + 4][64];
			int cnt = 0;
			if ((rc = parse_list(y, m, "sandbox.required_layers", names, &cnt, KG_SB_LAYER_COUNT_ + 4, e)))
				return rc;
			p->required_layers = 0;
			for (int i = 0; i < cnt; i++) {
				unsigned bit = kg_sb_layer_parse(names[i]);
				if (!bit)
					return kg_err(e, -EINVAL, "%s:%d: field 'sandbox.required_layers': unknown layer '%s'",
						      y->path, kg_yaml_line(kg_yaml_seq_item(y, m, i)), names[i]);
				p->required_layers |= bit;
			}
		}
		if ((m = kg_yaml_get(y, n, "threads")) && (rc = kg_yaml_bool(y, m, "sandbox.threads", &p->threads, e)))
			return rc;
	}
	if ((n = kg_yaml_get(y, root, "symbols"))) {
		static const char *const keys[] = {"allow", "extra", "libraries", NULL};
		if ((rc = kg_yaml_check_keys(y, n, keys, "symbols", e)))
			return rc;
		yaml_node_t *m;
		if ((m = kg_yaml_get(y, n, "allow")) &&
		    (rc = parse_list(y, m, "symbols.allow", p->symbols, &p->n_symbols, KG_POLICY_MAX_LIST, e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "libraries")) &&
		    (rc = parse_list(y, m, "symbols.libraries", p->libraries, &p->n_libraries, 32, e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "extra"))) {
			int cnt = 0;
			if ((rc = parse_list(y, m, "symbols.extra", p->symbols + p->n_symbols, &cnt,
					     KG_POLICY_MAX_LIST - p->n_symbols, e)))
				return rc;
			p->n_symbols += cnt;
		}
	}
	if ((n = kg_yaml_get(y, root, "compile"))) {
		static const char *const keys[] = {"allowed_flags", NULL};
		yaml_node_t *m;
		if ((rc = kg_yaml_check_keys(y, n, keys, "compile", e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "allowed_flags")) &&
		    (rc = parse_list(y, m, "compile.allowed_flags", p->flags, &p->n_flags, 64, e)))
			return rc;
	}
	if ((n = kg_yaml_get(y, root, "gpu"))) {
		static const char *const keys[] = {"required", "compute_sanitizer", "memory_mb", "tensor_maps",
						   "driver_entry_points", NULL};
		yaml_node_t *m;
		if ((rc = kg_yaml_check_keys(y, n, keys, "gpu", e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "required")) && (rc = kg_yaml_bool(y, m, "gpu.required", &p->gpu_required, e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "compute_sanitizer")) && (rc = parse_sanitizer(y, m, &p->compute_sanitizer, e)))
			return rc;
		if ((rc = get_int(y, n, "memory_mb", "gpu.memory_mb", 16, 1 << 24, &v, e)))
			return rc;
		if (kg_yaml_get(y, n, "memory_mb"))
			p->gpu_memory_bytes = (uint64_t)v << 20;
		if ((m = kg_yaml_get(y, n, "tensor_maps")) && (rc = kg_yaml_bool(y, m, "gpu.tensor_maps", &p->gpu_tensor_maps, e)))
			return rc;
		if ((m = kg_yaml_get(y, n, "driver_entry_points")) &&
		    (rc = kg_yaml_bool(y, m, "gpu.driver_entry_points", &p->gpu_driver_entry_points, e)))
			return rc;
	}
	return 0;
}

int kg_policy_load(const char *path, struct kg_policy *p, kg_error *e)
{
	kg_yaml y;
	kg_policy_defaults(p);
	snprintf(p->path, sizeof(p->path), "%s", path);
	int rc = kg_yaml_load_user(&y, path, "policy", e);
	if (rc)
		return rc;
	if ((rc = parse_policy(&y, p, e)))
		kg_yaml_redact(&y, e);
	kg_yaml_free(&y);
	return rc;
}
