/* The verdict of one verification: accepted or not, every reason with the details a reviewer
 * needs, every check that ran, and the measurements. Reports are rendered from this alone. */
#ifndef KG_VERDICT_H
#define KG_VERDICT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "kg_common.h"
#include "kg_vocab.h"

/* Exit codes of `kgate verify`. */
enum { KG_EXIT_ACCEPTED = 0, KG_EXIT_REJECTED = 1, KG_EXIT_USAGE = 2, KG_EXIT_INTERNAL = 3 };

struct kg_reason {
	enum kg_reason_code code; /* kg_reason_name(): stable, dotted, "check.mismatch" */
	char message[600];
	char input_class[16]; /* "" when not about a trial */
	uint64_t seed; /* trial seed (revealed after the run) */
	int has_seed;
	char shape[128]; /* "R=64 C=1000" */
	char tensor[32];
	int64_t index; /* flat element index, -1 when none */
	char index_str[96];
	int has_values;
	double expected, got;
	int occurrences; /* trials that hit this code at this shape (the first one is described) */
	char also_classes[96]; /* other input classes that hit it, "large,tiny" */
	/* What the summary groups a trial's repeats by (summary.c): the phase it arose in ("after the
	 * call", "during timing"; "" where none is named) and the check that found it, which is the code
	 * but where the code is broader (check.shape_variant: check.mismatch, check.nan or
	 * check.unwritten_output away from the base shape) */
	char where[24];
	enum kg_reason_code found;
};

enum kg_check_status { KG_CHECK_PASS = 0, KG_CHECK_FAIL, KG_CHECK_SKIP };

struct kg_check {
	char name[48]; /* "correctness", "canary", "timing", ... */
	enum kg_check_status status;
	char detail[300];
	double seconds;
};

struct kg_timing {
	int n;
	double median_ms, p10_ms, p90_ms, min_ms, max_ms, spread; /* spread = (p90-p10)/median */
	double parent_median_ms; /* what the parent's own clock saw per call */
	int batch; /* calls back to back in each measurement (each a span over that many; 1: none) */
};

/* How close the candidate came over the correctness trials that compared its outputs: the worst
 * element-wise and norm-wise errors, and the comparison that used the largest share of its
 * tolerance (verifier/judge/compare.h), with where it happened. */
struct kg_accuracy {
	int n; /* comparisons (trials x outputs); 0: none, the rest is unset */
	double max_abs_err, max_rel_err, normwise_err; /* each the worst over every comparison */
	double tol_used; /* the largest max |got-exp| / (atol + rtol*|exp|); <= 1 passes */
	double atol, rtol, growth; /* the tolerance of that comparison */
	char input_class[16], shape[128], tensor[32];
	/* The output's effective precision: the fewest bits any comparison kept (kg_effective_bits of
	 * its norm-wise error after each row's common factor, compare.h), that error, and where; and
	 * the largest row factor taken out anywhere (0 without factor: row). */
	double effective_bits, normwise_res, factor_max;
	char bits_class[16], bits_shape[128], bits_tensor[32];
};

struct kg_verdict {
	int accepted;
	int exit_code;
	char task[64];
	char candidate[4096];
	char backend[8];
	char policy[4096];
	char shape_set[32];
	char dims[128];
	uint64_t master_seed; /* the base of the trials' ids */
	char seed_key[68]; /* the run's secret key, 64 hex digits: what --seed takes ("" in old tests) */
	char layers_active[256], layers_failed[256];
	char compile_log[4096];
	int n_reasons, cap_reasons;
	struct kg_reason *reasons;
	int n_checks, cap_checks;
	struct kg_check *checks;
	int trials_run; /* correctness trials (class x seed x shape) */
	char degenerate_classes[160];
	struct kg_accuracy acc;
	int timed; /* timing section valid */
	struct kg_timing cand, ref;
	double speedup; /* ref median / candidate median */
	/* The implementations the speed was measured against, timed with the same protocol: kgate's
	 * own reference (a C or CUDA one), eager PyTorch (a module task's Model is its reference), and
	 * torch.compile where the installed torch has it (else its status says why not); best is the
	 * fastest one timed, the speedup a reader should quote. */
	int n_baselines;
	struct kg_baseline {
		char name[24]; /* "reference", "eager", "compile" */
		int timed;
		double median_ms, speedup;
		double p10_ms, p90_ms, spread; /* as kg_timing's */
		int n, batch; /* measurements, calls back to back in each */
		char status[120]; /* "" when timed, else why not ("unavailable: torch 1.13 has none") */
		/* what it is and how it was timed: "torch 2.11.0 eager of 23_Softmax.py's Model, on
		 * NVIDIA H100, kgate-device's span" */
		char how[240];
	} baselines[3];
	/* index into baselines of the speedup to quote: the faster of eager and compile where either
	 * was timed, else the reference; -1 when none was timed */
	int best_baseline;
	/* a module task: its inputs in the order kg_forward gets them (activations, then the Model's
	 * parameters and buffers in state_dict order), named in a rejection */
	char input_order[400];
	/* a module task's constants, the numbers its forward gets from get_inputs() ("s=3.14 (float,
	 * argument 1)"), "" for none */
	char constants[300];
	/* A module task (its reference a PyTorch Model): the mode the Model ran in and whose word that
	 * was, what became of each of its parameters and buffers (drawn per trial, or kept at the
	 * values its constructor gives them, the same on both sides), and the shapes dropped because
	 * the Model itself refuses them (no verdict about the candidate either way). */
	struct kg_module_report {
		int present;
		char mode[8]; /* "train", "eval" */
		char mode_from[8]; /* "problem": as its constructor leaves it; "policy": module_mode */
		int n_entries, n_more; /* n_more: entries past the table's room */
		struct kg_module_entry {
			char name[64];
			char how[8]; /* "drawn", "kept" */
			char kind[12]; /* "parameter", "statistic", "variance", "buffer" */
			char dtype[12];
			char shape[48]; /* "1x1x16x16" at the base shape; "scalar" */
		} entries[32];
		int n_dropped;
		struct kg_module_drop {
			char shape[128];
			char why[320];
		} dropped[24];
	} module;
	double bytes, flops; /* cost of one call at the nominal dims, 0 when unknown */
	double cand_gbps, cand_gflops, roofline; /* roofline: fraction of the measured ceiling */
	double ceiling_gbps;
	double ceiling_gflops; /* the measured compute ceiling (the parent's cores; 0 when not measured) */
	double t_compile_s, t_reference_s, t_checks_s, t_timing_s, t_total_s;
	int compile_cached; /* the candidate's .so and compile log came from the compile cache */
	char device[128];
	char internal_error[512]; /* exit 3 */
	char source_root[4096]; /* SARIF URIs are relative to it ("" : the current directory) */
	time_t started; /* wall clock at kg_verdict_init: the JUnit timestamp */
};

void kg_verdict_init(struct kg_verdict *v);
void kg_verdict_free(struct kg_verdict *v);
/* Appends a reason; returns it so callers can fill the optional fields. Never NULL: on memory
 * exhaustion the last slot is reused, so a rejection can never be lost. */
struct kg_reason *kg_verdict_add_reason(struct kg_verdict *v, enum kg_reason_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
struct kg_check *kg_verdict_add_check(struct kg_verdict *v, const char *name, enum kg_check_status st,
				      double seconds, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int kg_verdict_has_reason(const struct kg_verdict *v, enum kg_reason_code code);
/* Sets accepted/exit_code from the reasons (their exit class) and the internal error. A check that
 * says PASS for work that did not run (correctness with trials_run 0, timing without a timed
 * call) becomes SKIP, "not run"; a verdict without one correctness trial and without a reason is
 * never accepted: exit 3, not verified. */
void kg_verdict_finish(struct kg_verdict *v);

#endif
