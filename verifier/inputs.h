/* Input classes and their generators. Every tensor of every trial is filled from its own
 * ChaCha20 streams under the trial's input key (derived from the run's secret); weights and
 * biases are randomised like data. A tensor's draw is a kg_gen_tensor (common/kg_gen.h): the host
 * fills it here, kgate-device on the GPU, to the same bits. */
#ifndef KG_INPUTS_H
#define KG_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

#include "kg_gen.h"
#include "kg_vocab.h"
#include "verifier/prng.h"
#include "verifier/task.h"


/* Fills n elements of dtype at dst for input number `tensor` (0..15) under class c, from the
 * streams of trial_key. Weights and biases under the classes that shape the data (zeros, ones,
 * identity, sorted, large_mean, constant_rows, near_duplicate, spiked, mixed...) still get normal
 * values: the class tests the data, and a default-init identity weight is exactly the shortcut we
 * must not allow. mix (a bitmask of classes, the plan's) is what the rows of a mixed tensor may
 * be: each row (the last dimension) takes one of its seeded classes other than mixed, chosen and
 * parameterised from the row's own stream. */
void kg_inputs_fill(void *dst, kg_dtype dt, size_t n, const int64_t *shape, int ndim, enum kg_role role,
		    enum kg_input_class c, unsigned mix, const kg_key *trial_key, int tensor);
/* The same draw as kg_inputs_fill's, as parameters: what kgate-device fills on the GPU. */
void kg_inputs_params(struct kg_gen_tensor *t, kg_dtype dt, size_t n, const int64_t *shape, int ndim,
		      enum kg_role role, enum kg_input_class c, unsigned mix, const kg_key *trial_key, int tensor);
/* Fills t's elements at dst on the host, on every core. */
void kg_inputs_fill_tensor(void *dst, const struct kg_gen_tensor *t, const kg_key *trial_key);
/* The ziggurat's tables (kg_gen_zig_init), made once. */
const struct kg_gen_zig *kg_inputs_zig(void);
/* The large_mean class gives a tensor of dtype dt a mean of magnitude in [lo, 2 lo), far above its
 * unit spread, so that E[x^2]-E[x]^2 cancels; lo is small enough that honest fp32 sums stay within
 * the tasks' tolerances. */
double kg_inputs_large_mean_lo(kg_dtype dt);

#endif
