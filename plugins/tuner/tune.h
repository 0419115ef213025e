/* The parameter-space tuner's core, apart from the plugin ABI so that it can be unit-tested: the
 * template's `kgate:tune NAME = {v1, v2, ...}` directives, the sources it expands to, and which
 * settings to propose next (a grid where the space is small, otherwise random sampling and
 * successive halving around the best settings so far). Deterministic for a given seed. */
#ifndef KG_TUNE_H
#define KG_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "kg_common.h"

#define KG_TUNE_MAX_PARAMS 16
#define KG_TUNE_MAX_VALUES 64
#define KG_TUNE_MAX_NAME 64
#define KG_TUNE_MAX_VALUE 64

struct kg_tune_param {
	char name[KG_TUNE_MAX_NAME];
	int line; /* of its directive, 1-based */
	int n;
	char values[KG_TUNE_MAX_VALUES][KG_TUNE_MAX_VALUE];
};

struct kg_tune_space {
	char name[256]; /* the template's file name, for #line and labels */
	int cuda; /* .cu template: CUDA candidates */
	int n;
	struct kg_tune_param p[KG_TUNE_MAX_PARAMS];
	uint64_t size; /* settings in the space, saturating at UINT64_MAX */
	char *body; /* the template text (owned) */
};

/* A setting: one value index per parameter. */
typedef struct kg_tune_point {
	uint8_t ix[KG_TUNE_MAX_PARAMS];
} kg_tune_point;

/* Parses a template. path names it in errors, which read "path:line: what is wrong"; text is its
 * content. A file with no directive is an error too (nothing to tune). */
int kg_tune_parse(const char *path, const char *text, struct kg_tune_space *s, kg_error *e);
/* Reads and parses path (at most 1 MiB). */
int kg_tune_load(const char *path, struct kg_tune_space *s, kg_error *e);
void kg_tune_free(struct kg_tune_space *s);

/* "BLOCK=256 UNROLL=4": the label a setting is known by (the candidate's idea text). */
int kg_tune_label(const struct kg_tune_space *s, const kg_tune_point *pt, kg_buf *out);
/* The setting a label (or a generated source's first line) names; -ENOENT when it names another
 * space's setting. */
int kg_tune_parse_label(const struct kg_tune_space *s, const char *label, kg_tune_point *pt);
/* The candidate: a marker line with the label, one #define per parameter, #line 1, the template. */
int kg_tune_source(const struct kg_tune_space *s, const kg_tune_point *pt, kg_buf *out);
/* The label in a source kg_tune_source wrote (its first line), into out; -ENOENT when none. */
int kg_tune_source_label(const char *source, char *out, size_t outsz);

/* One verified setting and its speedup (accepted and timed ones only are ranked). */
struct kg_tune_result {
	kg_tune_point pt;
	double speedup;
};

struct kg_tune_plan {
	uint64_t seed;
	int round, rounds_total; /* round is 1-based */
	int budget; /* settings wanted this round */
	int eta; /* halving factor (>= 2) */
	uint64_t grid_max; /* a space at most this large (and within the whole budget) is a grid */
};

/* The settings for this round, at most min(budget, max_out), none of them in seen[]; ranked[] is
 * what has been measured so far (any order: it is ranked here). Returns how many, and sets *grid
 * when the space is walked as a grid. */
int kg_tune_next(const struct kg_tune_space *s, const struct kg_tune_plan *plan, const kg_tune_point *seen,
		 int n_seen, const struct kg_tune_result *ranked, int n_ranked, kg_tune_point *out, int max_out,
		 int *grid);

#endif
