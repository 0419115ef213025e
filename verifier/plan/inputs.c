/* Input generation on the host: a trial's class and a tensor's role mapped onto the generator's
 * per-element core (common/kg_gen.h), and its elements filled on a few threads, eight ChaCha blocks
 * at a time. kgate-device runs the same core on the GPU from the same parameters: element i is the
 * same bits there, whatever splits the work. */
#include "verifier/plan/inputs.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verifier/plan/dtype.h"

#define CHUNK (1u << 20) /* elements a thread takes at a time; a multiple of 64 */
#define S_PARAMS 0u

static struct kg_gen_zig zig;
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_make(void)
{
	kg_gen_zig_init(&zig);
}

const struct kg_gen_zig *kg_inputs_zig(void)
{
	pthread_once(&zig_once, zig_make);
	return &zig;
}

double kg_inputs_large_mean_lo(kg_dtype dt)
{
	/* fp32: |mean| in [16, 32) with a unit spread. One-pass fp32 variance of such rows is off by
	 * 1e-3 or more (E[x^2] ~ 500 cancels down to 1); an honest fp32 mean of a row of a hundred is off
	 * by ~1e-5, well inside the tolerances (at 64 and more, honest fp32 sums fail them too).
	 * Half precisions: 4 and up. */
	return kg_gen_large_mean_lo((uint32_t)dt);
}

double kg_inputs_large_mean_for(kg_dtype dt, double rtol, double rms)
{
	double lo = kg_inputs_large_mean_lo(dt), b = rtol > rms ? rtol : rms;
	if (dt != KG_F32 || !(b > 0))
		return lo;
	/* the dtype's 16 at the C LayerNorm's 1e-5, growing as b^0.75: about 90 at a module task's
	 * 1e-4, where one-pass variance's cancellation (which grows as the mean squared) is several
	 * times the bound in every draw, and an honest two-pass kernel's error (which grows as the
	 * mean) stays near a third of it. At b^0.5 (about 50) one run in fourteen let a one-pass
	 * variance through at the base shape. */
	double sized = 16.0 * pow(b / 1e-5, 0.75);
	return sized > lo ? sized : lo;
}

void kg_inputs_size_large_mean(struct kg_gen_tensor *t, double lo)
{
	double base = kg_gen_large_mean_lo(t->dtype);
	if (t->kind == KG_GEN_LARGE_MEAN && lo > 0 && base > 0)
		t->offset *= lo / base;
}

static int shapes_the_data(enum kg_input_class c)
{
	return c == KG_CLASS_ZEROS || c == KG_CLASS_ONES || c == KG_CLASS_SPECIAL || c == KG_CLASS_IDENTITY ||
	       c == KG_CLASS_SORTED || c == KG_CLASS_LARGE_MEAN || c == KG_CLASS_CONSTANT_ROWS ||
	       c == KG_CLASS_NEAR_DUPLICATE || c == KG_CLASS_SPIKED || c == KG_CLASS_MIXED;
}

static uint32_t kind_of(enum kg_input_class c)
{
	static const uint32_t kinds[KG_CLASS_COUNT_] = {
		[KG_CLASS_NORMAL] = KG_GEN_NORMAL,
		[KG_CLASS_UNIFORM] = KG_GEN_UNIFORM,
		[KG_CLASS_LARGE] = KG_GEN_LARGE,
		[KG_CLASS_TINY] = KG_GEN_TINY,
		[KG_CLASS_ZEROS] = KG_GEN_ZEROS,
		[KG_CLASS_ONES] = KG_GEN_ONES,
		[KG_CLASS_NEGATIVE] = KG_GEN_NEGATIVE,
		[KG_CLASS_SPECIAL] = KG_GEN_SPECIAL,
		[KG_CLASS_IDENTITY] = KG_GEN_IDENTITY,
		[KG_CLASS_SORTED] = KG_GEN_SORTED,
		[KG_CLASS_LARGE_MEAN] = KG_GEN_LARGE_MEAN,
		[KG_CLASS_CONSTANT_ROWS] = KG_GEN_CONSTANT_ROWS,
		[KG_CLASS_NEAR_DUPLICATE] = KG_GEN_NEAR_DUPLICATE,
		[KG_CLASS_SPIKED] = KG_GEN_SPIKED,
		[KG_CLASS_MIXED] = KG_GEN_MIXED,
	};
	return (unsigned)c < KG_CLASS_COUNT_ ? kinds[c] : KG_GEN_NORMAL;
}

void kg_inputs_params(struct kg_gen_tensor *t, kg_dtype dt, size_t n, const int64_t *shape, int ndim,
		      enum kg_role role, enum kg_input_class c, unsigned mix, const kg_key *trial_key, int tensor)
{
	memset(t, 0, sizeof(*t));
	t->n = n;
	t->dtype = (uint32_t)dt;
	t->tensor = (uint32_t)tensor;
	t->rowlen = ndim > 0 && shape[ndim - 1] > 0 ? (uint64_t)shape[ndim - 1] : 1;
	if (ndim >= 2 && shape[ndim - 1] == shape[ndim - 2] && shape[ndim - 1] > 0)
		t->mat = (uint64_t)shape[ndim - 1];
	/* Weights and biases under the classes that shape the data still get normal values: the class
	 * tests the data, and a default-init identity weight is exactly the shortcut we must not allow. */
	if (role != KG_ROLE_ACTIVATION && shapes_the_data(c))
		c = KG_CLASS_NORMAL;
	/* per-tensor offset and scale, from the tensor's own stream */
	kg_prng r;
	kg_prng_init(&r, trial_key, KG_GEN_STREAM(tensor, S_PARAMS), 0);
	t->offset = 2.0 * kg_prng_uniform(&r) - 1.0;
	t->scale = pow(10.0, 1.2 * kg_prng_uniform(&r) - 0.6);
	t->magnitude = dt == KG_F16 ? 2e3 : dt == KG_BF16 ? 1e6 : 1e4;
	if (dt == KG_F16)
		t->offset *= 0.5;
	if (role == KG_ROLE_VARIANCE && kg_dtype_is_float(dt)) {
		/* a variance is valid under every class: uniform in [s/4, 7s/4], s the tensor's scale
		 * (0.25 to 4): positive, and far enough from zero that eps does not decide it */
		t->kind = KG_GEN_UNIFORM;
		t->offset = t->scale;
		t->scale *= 0.75;
		return;
	}
	if (c == KG_CLASS_LARGE_MEAN) {
		double lo = kg_inputs_large_mean_lo(dt);
		t->offset = (kg_prng_next(&r) & 1 ? lo : -lo) * (1.0 + kg_prng_uniform(&r));
		t->scale = 1.0;
	}
	if (!kg_dtype_is_float(dt)) {
		t->kind = c == KG_CLASS_ZEROS ? KG_GEN_ZEROS : c == KG_CLASS_ONES ? KG_GEN_ONES : KG_GEN_INT;
		return;
	}
	t->kind = kind_of(c);
	if (c != KG_CLASS_MIXED)
		return;
	/* A mixed tensor's rows take the seeded classes among those given (the plan's): none of
	 * zeros, ones or identity, so no row of it was seen in another trial; special only where the
	 * task defines it. */
	for (int k = 0; k < KG_CLASS_COUNT_ && t->n_mix < KG_GEN_MAX_MIX; k++)
		if ((mix >> k & 1) && kg_class_is_seeded((enum kg_input_class)k) && k != KG_CLASS_MIXED)
			t->mix[t->n_mix++] = kind_of((enum kg_input_class)k);
	if (!t->n_mix)
		t->mix[t->n_mix++] = KG_GEN_NORMAL;
}

struct fill_job {
	const struct kg_gen_tensor *t;
	const uint32_t *key;
	const struct kg_gen_zig *z;
	void *dst;
	const double *base; /* a near-duplicate's base row, made once (NULL: per element) */
	size_t next_chunk; /* shared cursor */
	pthread_mutex_t lock;
};

/* Elements [lo, hi) (lo a multiple of 64), as kg_gen_range computes them, with the elements'
 * blocks made eight at a time (AVX2 where the CPU has it): the same words as kg_gen_elem_block's. */
static void fill_range(const struct fill_job *j, uint64_t lo, uint64_t hi)
{
	const struct kg_gen_tensor *t = j->t;
	if (kg_gen_keyless(t) || t->kind == KG_GEN_CONSTANT_ROWS) {
		kg_gen_range(t, j->key, j->z, j->dst, lo, hi);
		return;
	}
	int per_row = kg_gen_per_row(t);
	struct kg_gen_row row;
	uint64_t cur_row = UINT64_MAX;
	if (!per_row)
		kg_gen_row_enter(t, j->key, j->z, 0, &row);
	uint32_t blk[8][16];
	for (uint64_t g0 = lo; g0 < hi; g0 += 64) {
		uint64_t group = g0 >> 3; /* a multiple of 8: the eight counters never wrap */
		const uint32_t nonce[3] = {KG_GEN_STREAM(t->tensor, KG_GEN_S_ELEM), (uint32_t)(group >> 32), 0};
		kg_chacha20_block8(j->key, (uint32_t)group, nonce, blk);
		uint64_t end = g0 + 64 < hi ? g0 + 64 : hi;
		for (uint64_t i = g0; i < end; i++) {
			if (per_row && i / t->rowlen != cur_row) {
				cur_row = i / t->rowlen;
				kg_gen_row_enter(t, j->key, j->z, cur_row, &row);
			}
			uint64_t u = kg_gen_word_of(blk[(i - g0) >> 3], i);
			double v = kg_gen_value(t, j->key, j->z, &row, i, u, j->base);
			if (t->dtype == KG_GEN_F32) /* the common dtype, stored without a switch */
				((float *)j->dst)[i] = (float)v;
			else
				kg_gen_store(j->dst, t->dtype, i, v);
		}
	}
}

static void *fill_worker(void *arg)
{
	struct fill_job *j = arg;
	size_t nchunks = (j->t->n + CHUNK - 1) / CHUNK;
	for (;;) {
		pthread_mutex_lock(&j->lock);
		size_t c = j->next_chunk++;
		pthread_mutex_unlock(&j->lock);
		if (c >= nchunks)
			return NULL;
		uint64_t lo = (uint64_t)c * CHUNK, hi = lo + CHUNK < j->t->n ? lo + CHUNK : j->t->n;
		fill_range(j, lo, hi);
	}
}

void kg_inputs_fill_tensor(void *dst, const struct kg_gen_tensor *t, const kg_key *trial_key)
{
	struct fill_job j = {.t = t, .key = trial_key->w, .z = kg_inputs_zig(), .dst = dst};
	int dup = t->kind == KG_GEN_NEAR_DUPLICATE;
	for (uint32_t k = 0; t->kind == KG_GEN_MIXED && k < t->n_mix && k < KG_GEN_MAX_MIX; k++)
		dup |= t->mix[k] == KG_GEN_NEAR_DUPLICATE;
	double *base = NULL;
	/* a row of at most 16 Mi elements kept (128 MiB); longer ones are made per element */
	if (dup && t->rowlen <= (1u << 24) && (base = malloc(t->rowlen * sizeof(*base)))) {
		for (uint64_t c = 0; c < t->rowlen; c++)
			base[c] = kg_gen_base(t, j.key, j.z, c);
		j.base = base;
	}
	pthread_mutex_init(&j.lock, NULL);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nchunks = (t->n + CHUNK - 1) / CHUNK;
	int nthreads = ncpu > 1 ? (int)(ncpu < 16 ? ncpu : 16) : 1;
	if ((size_t)nthreads > nchunks)
		nthreads = (int)nchunks;
	pthread_t th[16];
	int started = 0;
	for (int i = 1; i < nthreads; i++) {
		if (pthread_create(&th[started], NULL, fill_worker, &j))
			break;
		started++;
	}
	fill_worker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&j.lock);
	free(base);
}

void kg_inputs_fill(void *dst, kg_dtype dt, size_t n, const int64_t *shape, int ndim, enum kg_role role,
		    enum kg_input_class c, unsigned mix, const kg_key *trial_key, int tensor)
{
	struct kg_gen_tensor t;
	kg_inputs_params(&t, dt, n, shape, ndim, role, c, mix, trial_key, tensor);
	kg_inputs_fill_tensor(dst, &t, trial_key);
}
