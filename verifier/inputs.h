/* Input classes and their generators. Every tensor of every trial is filled from its own
 * sub-stream of a secret seed; weights and biases are randomised like data. */
#ifndef KG_INPUTS_H
#define KG_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

#include "verifier/prng.h"
#include "verifier/task.h"

enum kg_input_class {
	KG_CLASS_NORMAL = 0, /* normal, random offset and scale */
	KG_CLASS_UNIFORM, /* uniform, random offset and scale */
	KG_CLASS_LARGE, /* large magnitudes (1e3..1e4 for f32; near the top of the range for f16) */
	KG_CLASS_TINY, /* tiny values and denormals */
	KG_CLASS_ZEROS,
	KG_CLASS_ONES,
	KG_CLASS_NEGATIVE, /* negative only */
	KG_CLASS_SPECIAL, /* NaN and Inf sprinkled in; only where the task defines them */
	KG_CLASS_IDENTITY, /* identity matrices (2-D square activations), normal elsewhere */
	KG_CLASS_SORTED, /* ascending along the last dimension */
	KG_CLASS_COUNT_
};

const char *kg_class_name(enum kg_input_class c);
/* -EINVAL for an unknown name. */
int kg_class_parse(const char *name, enum kg_input_class *out);
/* Mask of all classes. */
#define KG_CLASS_ALL ((1u << KG_CLASS_COUNT_) - 1)

/* Fills n elements of dtype at dst for tensor `spec` under class c. Weights and biases under the
 * degenerate classes (zeros, ones, identity) still get random values: the class tests the data,
 * and a default-init identity weight is exactly the shortcut we must not allow. */
void kg_inputs_fill(void *dst, kg_dtype dt, size_t n, const int64_t *shape, int ndim, enum kg_role role,
		    enum kg_input_class c, uint64_t seed);

#endif
