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
#include "verifier/plan/prng.h"
#include "verifier/plan/task.h"


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
/* The large_mean lower bound for a task whose bounds are rtol and rms (relative to an element and
 * to the output's RMS): one-pass fp32 variance is off by about mean^2 * 2^-24 relative to a unit
 * variance, an honest two-pass one by about mean * 2^-24 times its sums' growth, so the mean is
 * sized to the bound (|mean|^2 * 2^-24 about 1.5 times it): under a bound of 1e-5 (the C LayerNorm)
 * it is the dtype's own lo (16 for fp32), under 1e-4 (a module task's) about 50, where the one-pass
 * error is 2 to 20 bounds and an honest one still a fifth of one. fp32 only; other dtypes keep
 * theirs. */
double kg_inputs_large_mean_for(kg_dtype dt, double rtol, double rms);
/* A draw of class large_mean given a mean of magnitude in [lo, 2 lo) (the dtype's default: 16 for
 * fp32): its offset scaled, the rest of the draw as it was. Any other draw is left alone. */
void kg_inputs_size_large_mean(struct kg_gen_tensor *t, double lo);

#endif
