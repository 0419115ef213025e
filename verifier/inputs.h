/* Input classes and their generators. Every tensor of every trial is filled from its own
 * sub-stream of a secret seed; weights and biases are randomised like data. */
#ifndef KG_INPUTS_H
#define KG_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

#include "kg_vocab.h"
#include "verifier/prng.h"
#include "verifier/task.h"


/* Fills n elements of dtype at dst for tensor `spec` under class c. Weights and biases under the
 * degenerate classes (zeros, ones, identity) still get random values: the class tests the data,
 * and a default-init identity weight is exactly the shortcut we must not allow. */
void kg_inputs_fill(void *dst, kg_dtype dt, size_t n, const int64_t *shape, int ndim, enum kg_role role,
		    enum kg_input_class c, uint64_t seed);

#endif
