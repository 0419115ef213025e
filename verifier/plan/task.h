/* Task manifests: what a kernel must compute (tensors, symbolic shapes, tolerance, cost formulas)
 * and where its trusted references live. Parsed strictly from YAML; see tasks/README.md. */
#ifndef KG_TASK_H
#define KG_TASK_H

#include <limits.h>
#include <stdint.h>

#include <kgate/kernel.h>

#include "kg_common.h"
#include "kg_vocab.h"
#include "verifier/plan/expr.h"

/* Inputs, and outputs, a manifest may declare, each: the format's bound, not the wire's (the runner's
 * tensor table holds any count the memory does, runner/wire.h). A whole KernelBench model's
 * parameters and buffers are its inputs: ResNet101 has 626. */
#define KG_MAX_TENSORS 1024
#define KG_MAX_CONSTS 4 /* a module task's numbers from get_inputs() */
#define KG_MAX_SHAPESETS 8
#define KG_MAX_VARIANTS 12
#define KG_MAX_RANDOM_SHAPES 8
#define KG_RANDOM_MIN_SPAN 32 /* a range holds every residue mod 32 (hence 4, 8 and odd sizes) */
#define KG_NAME_LEN 32
#define KG_EXPR_LEN 128

enum kg_role {
	KG_ROLE_ACTIVATION = 0, /* data flowing through the op */
	KG_ROLE_WEIGHT, /* learnable parameter: randomised like data, never left at a default init */
	KG_ROLE_BIAS,
	/* a normalisation's running statistics (a module task's BatchNorm): drawn per trial like a
	 * weight, the variance from a distribution that keeps it valid (positive, away from zero) */
	KG_ROLE_STATISTIC,
	KG_ROLE_VARIANCE,
};

enum kg_terms {
	KG_TERMS_NONE = 0,
	/* `terms: abs_inputs`: the reference run on the inputs' absolute values gives each element's
	 * sum of term magnitudes (sum |w||x|): true of sums of products passed through non-decreasing
	 * maps (matmul, conv, ReLU, max-pool) */
	KG_TERMS_ABS_INPUTS,
	/* `terms: reference`: the task's reference exports kg_error_terms, which writes T_i itself
	 * from the inputs (a normalisation: |w|(|x - mean| + mean|x|)/std, its condition) */
	KG_TERMS_REFERENCE,
};

struct kg_tensor_spec {
	char name[KG_NAME_LEN];
	kg_dtype dtype;
	enum kg_role role;
	int ndim;
	char dim[KG_MAX_DIMS][KG_EXPR_LEN];
	/* outputs: how many terms each element reduces over (`reduction`), "" for none (1); it sets
	 * the tolerance's growth term (verifier/judge/compare.h) */
	char reduction[KG_EXPR_LEN];
	/* outputs: where each element's own error scale T_i comes from, so that the tolerance follows
	 * each element's cancellation or conditioning (compare.h) instead of the output's RMS alone */
	enum kg_terms terms;
	/* outputs: `factor: row`, each row (the last dimension) divided by one reduction of its own
	 * (softmax's sum), whose rounding is then one factor common to the row: the growth term bounds
	 * that factor instead of every element (compare.h) */
	int factor_row;
};

/* A number a KernelBench problem's get_inputs() gives its forward (`s = 3.14`): a constant of the
 * task, passed as it is to the Model's and ModelNew's forward at its argument position `at` (a C
 * candidate is written for it). value is the manifest's text, which Python reads back exactly. */
struct kg_const {
	char name[KG_NAME_LEN];
	int at; /* the forward's argument position, counting tensors and constants */
	char type; /* 'i' int, 'f' float, 'b' bool */
	char value[48];
};

struct kg_shapeset {
	char name[KG_NAME_LEN];
	kg_dims dims;
};

struct kg_task {
	char name[64];
	char description[512];
	char path[PATH_MAX]; /* manifest file */
	char dir[PATH_MAX]; /* directory holding it; references are relative to it */
	int n_dims;
	char dims[KG_MAX_SYMS][KG_SYM_LEN]; /* declared symbolic dimensions */
	int n_shapesets;
	struct kg_shapeset shapesets[KG_MAX_SHAPESETS]; /* [0] is always "nominal" */
	int n_variants;
	kg_dims variants[KG_MAX_VARIANTS]; /* partial: dims not named keep the base shape's value */
	/* `random_shapes`: n_random shapes per run, each dim named in ranges drawn in [lo, hi] from the
	 * run's secret (verifier/plan/plan.c), the others the base shape's */
	int n_random;
	int n_ranges;
	char range_dim[KG_MAX_SYMS][KG_SYM_LEN];
	int64_t range_lo[KG_MAX_SYMS], range_hi[KG_MAX_SYMS];
	int n_inputs;
	struct kg_tensor_spec inputs[KG_MAX_TENSORS];
	int n_outputs;
	struct kg_tensor_spec outputs[KG_MAX_TENSORS];
	int n_consts;
	struct kg_const consts[KG_MAX_CONSTS];
	double atol, rtol;
	double rms_tol; /* extra absolute slack, relative to the RMS of the reference output */
	char cost_bytes[KG_EXPR_LEN]; /* fewest bytes moved through memory */
	char cost_flops[KG_EXPR_LEN];
	/* The trusted references, one per backend (the manifest's `reference: {c: ..., cuda: ...}`,
	 * keys from kg_vocab.h), absolute; "" where the task has none. The C one is required. */
	char ref[KG_BACKEND_COUNT_][PATH_MAX];
	int n_ref_libs[KG_BACKEND_COUNT_];
	char ref_libs[KG_BACKEND_COUNT_][4][KG_NAME_LEN];
	/* `baseline: {torch: FILE.py}`: the existing implementation a candidate's speed is quoted
	 * against, a KernelBench-format module whose Model takes the task's inputs in order (eager and
	 * torch.compile, baseline.c); a module task's (and an imported one's: `reference: torch:`
	 * without `baseline:`) is the module itself. "" when none. */
	char baseline_torch[PATH_MAX]; /* `<key>_libs`: what a reference links ("cublas") */
	int nonfinite; /* the reference defines NaN/Inf inputs (propagates them) */
	unsigned classes_excluded; /* input classes that make no sense for this task (bitmask) */
};

/* Loads and validates a manifest: every shape expression must evaluate for every shape set and
 * variant, and every size must be positive and bounded. (Finding one by name: resolve.h.) */
int kg_task_load(const char *path, struct kg_task *t, kg_error *e);

const struct kg_shapeset *kg_task_shapeset(const struct kg_task *t, const char *name);
/* Dims of variant i applied over base. */
void kg_task_variant_dims(const struct kg_task *t, const kg_dims *base, int i, kg_dims *out);

/* 0 when every tensor's shape evaluates under d, within bounds; what names d in the error. */
int kg_task_check_dims(const struct kg_task *t, const kg_dims *d, const char *what, kg_error *e);
/* An output's reduction length under dims (1 when it declares none). */
int kg_task_reduction(const struct kg_tensor_spec *s, const kg_dims *d, int64_t *n, kg_error *e);
/* Concrete tensor shape under dims. */
int kg_task_shape(const struct kg_tensor_spec *s, const kg_dims *d, int64_t shape[KG_MAX_DIMS], kg_error *e);
int64_t kg_shape_numel(int ndim, const int64_t *shape);
/* Evaluates a cost formula; -ENOENT when the task has none. */
int kg_task_cost(const struct kg_task *t, const char *formula, const kg_dims *d, double *out);
/* "R=64 C=1000" */
void kg_dims_str(const kg_dims *d, char *out, size_t outsz);

#endif
