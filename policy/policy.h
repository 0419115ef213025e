/* Verification policies: how hard kgate looks (trials, input classes, shapes), how strict it is
 * (tolerance, precision, symbols, speed gate) and how the sandbox is bounded. Loaded from YAML;
 * unknown keys and bad values are errors naming file and line. Schema: policy/SCHEMA.md. */
#ifndef KG_POLICY_H
#define KG_POLICY_H

#include <limits.h>
#include <stdint.h>

#include "kg_common.h"
#include "kg_vocab.h"

#define KG_POLICY_MAX_LIST 256

enum kg_precision { KG_PREC_FP32 = 0, KG_PREC_TF32, KG_PREC_FP16, KG_PREC_BF16 };
enum kg_shape_mode { KG_SHAPES_NOMINAL = 0, KG_SHAPES_VARIANTS };
/* The mode a module task's Model (and a ModelNew) runs in: as the problem's constructor leaves it
 * (KernelBench never calls eval(), so train mode, where BatchNorm uses the batch's statistics), or
 * the one the policy names for both. */
enum kg_module_mode { KG_MODULE_MODE_PROBLEM = 0, KG_MODULE_MODE_TRAIN, KG_MODULE_MODE_EVAL };

struct kg_policy {
	char path[PATH_MAX]; /* "" for the built-in defaults */
	/* correctness */
	double atol, rtol; /* < 0: the task's own */
	enum kg_precision precision; /* the lowest precision accepted; widens the tolerance */
	double growth; /* the reduction-length term's factor: growth*n*u (verifier/judge/compare.h) */
	int trials; /* seeds per input class */
	unsigned classes; /* mask over enum kg_input_class */
	enum kg_shape_mode shapes;
	char shape_set[32]; /* base shape set ("nominal", "ci", ...) */
	double async_delay_ms; /* how long after return outputs are re-read (check.async_escape) */
	enum kg_module_mode module_mode; /* a module task's Model: the problem's mode, train or eval */
	/* timing */
	int warmup, iterations;
	double min_speedup; /* speed gate: 0 = none */
	double max_spread; /* timing spread (p90-p10)/median above which the timing is flagged noisy */
	/* sandbox */
	double wall_s; /* per step (compile, each run session) */
	uint64_t memory_bytes;
	uint32_t cpu_s;
	uint32_t nproc;
	unsigned required_layers; /* KG_SB_LAYER_* mask */
	int threads; /* candidates may start threads */
	/* static checks */
	int n_symbols;
	char symbols[KG_POLICY_MAX_LIST][64]; /* allowed undefined dynamic symbols; '*' globs */
	int n_flags;
	char flags[64][64]; /* compiler flags a candidate may ask for */
	int n_libraries;
	char libraries[32][64]; /* DT_NEEDED entries allowed; '*' globs */
	/* gpu */
	int gpu_required;
	unsigned compute_sanitizer; /* bit per enum kg_sanitizer_tool: one sanitized run each */
	/* the device memory the candidate's process may hold beyond what it had before LOAD (its
	 * context, its runtime; kgate-device's count of the device's free memory): sandbox.memory */
	uint64_t gpu_memory_bytes;
	/* imports of the driver's tensor-map encoders (cuTensorMapEncodeTiled and its kin), resolved
	 * in the libcuda the runner loaded: host functions that fill a 128-byte descriptor */
	int gpu_tensor_maps;
	/* the runtime's driver entry points (cudaGetDriverEntryPoint*), any driver function by a name
	 * no import table shows: refused unless the policy says so */
	int gpu_driver_entry_points;
};

/* The built-in defaults (what policy/default.yaml also spells out). */
void kg_policy_defaults(struct kg_policy *p);
/* Loads a policy file over the defaults. */
int kg_policy_load(const char *path, struct kg_policy *p, kg_error *e);
/* (Finding a policy by name: verifier/plan/resolve.h.) */

const char *kg_precision_name(enum kg_precision p);
/* "problem", "train", "eval" */
const char *kg_module_mode_name(enum kg_module_mode m);
/* Widens a task tolerance to what the policy's precision accepts. */
void kg_policy_tolerance(const struct kg_policy *p, double task_atol, double task_rtol, double task_rms, double *atol,
			 double *rtol, double *rms);
/* The largest reduction-length term the precision allows (fp32: 2^-10, a quarter of bf16's unit
 * roundoff), so that a result rounded to bf16 never passes on a long reduction's allowance. */
double kg_policy_growth_cap(const struct kg_policy *p);
/* 1 when sym matches the policy's allowlist (a backend's own runtime imports are the backend
 * table's: verifier/plan/backend.h). */
int kg_policy_symbol_allowed(const struct kg_policy *p, const char *sym);
int kg_policy_flag_allowed(const struct kg_policy *p, const char *flag);
int kg_policy_library_allowed(const struct kg_policy *p, const char *lib);
/* The GPU imports the policy's gpu section allows by name (gpu.tensor_maps: the driver's tensor-map
 * encoders; gpu.driver_entry_points: the runtime's cudaGetDriverEntryPoint*, otherwise refused by
 * the CUDA backend whatever the symbol lists say); 1 allowed, 0 not this policy's to say. */
int kg_policy_gpu_symbol_allowed(const struct kg_policy *p, const char *sym);

#endif
