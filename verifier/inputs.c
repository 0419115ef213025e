/* Input generation. Large tensors are filled in 1 Mi-element chunks, each from its own ChaCha20
 * stream, on a few threads: the result depends only on the key, never on the thread count. */
#include "verifier/inputs.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verifier/dtype.h"

#define CHUNK (1u << 20)
/* Stream numbers under a trial key, per tensor t: (t << 24 | n). Chunks use 1..2^14. */
#define STREAM(t, n) ((uint32_t)(t) << 24 | (n))
#define S_PARAMS 0u
#define S_BASE_ROW 0xfffffeu
#define S_ROW 0xfffffdu
#define MAX_BASE_ROW (1u << 24) /* near_duplicate keeps one row in memory */

struct fill_job {
	void *dst;
	kg_dtype dt;
	size_t n;
	int64_t rowlen; /* last dimension */
	int64_t rows_per_mat, cols; /* identity: shape of the trailing 2-D matrix */
	int square;
	enum kg_input_class c;
	const kg_key *key;
	int tensor;
	double offset, scale, magnitude;
	const double *base_row; /* near_duplicate: the row every row is a near copy of */
	int64_t cur_row; /* constant_rows: the row whose value is cached (per chunk) */
	double cur_val;
	size_t next_chunk; /* shared cursor */
	pthread_mutex_t lock;
};

static double sample(struct fill_job *j, kg_prng *r, size_t i)
{
	int is_f16 = j->dt == KG_F16;
	switch (j->c) {
	case KG_CLASS_NORMAL:
		return j->offset + j->scale * kg_prng_normal(r);
	case KG_CLASS_UNIFORM:
		return j->offset + j->scale * (2.0 * kg_prng_uniform(r) - 1.0);
	case KG_CLASS_LARGE: {
		double s = kg_prng_next(r) & 1 ? 1.0 : -1.0;
		return s * j->magnitude * (0.5 + kg_prng_uniform(r));
	}
	case KG_CLASS_TINY:
		/* Half normal-range tiny values, half denormals of the dtype. */
		if (kg_prng_next(r) & 1)
			return kg_prng_normal(r) * (is_f16 ? 1e-6 : j->dt == KG_F32 ? 1e-40 : 1e-39);
		return kg_prng_normal(r) * (is_f16 ? 1e-3 : 1e-30);
	case KG_CLASS_ZEROS:
		return 0.0;
	case KG_CLASS_ONES:
		return 1.0;
	case KG_CLASS_NEGATIVE:
		return -fabs(j->scale * kg_prng_normal(r)) - 1e-3;
	case KG_CLASS_SPECIAL: {
		uint64_t x = kg_prng_below(r, 100);
		if (x == 0)
			return NAN;
		if (x == 1)
			return INFINITY;
		if (x == 2)
			return -INFINITY;
		return kg_prng_normal(r);
	}
	case KG_CLASS_IDENTITY: {
		if (!j->square)
			return kg_prng_normal(r);
		size_t in_mat = i % (size_t)(j->rows_per_mat * j->cols);
		return in_mat / (size_t)j->cols == in_mat % (size_t)j->cols ? 1.0 : 0.0;
	}
	case KG_CLASS_SORTED: {
		size_t col = i % (size_t)j->rowlen;
		return -1.0 + (2.0 * (double)col + kg_prng_uniform(r)) / (double)j->rowlen;
	}
	case KG_CLASS_LARGE_MEAN:
		return j->offset + j->scale * kg_prng_normal(r);
	case KG_CLASS_CONSTANT_ROWS: {
		/* one value per row; a row may straddle chunks, so it comes from the row's own stream */
		int64_t row = (int64_t)(i / (size_t)j->rowlen);
		if (row != j->cur_row) {
			kg_prng rr;
			kg_prng_init(&rr, j->key, STREAM(j->tensor, S_ROW), (uint64_t)row);
			j->cur_row = row;
			j->cur_val = j->offset + j->scale * kg_prng_normal(&rr);
		}
		return j->cur_val;
	}
	case KG_CLASS_NEAR_DUPLICATE: {
		/* every row the same base row, but for about one element in 16 moved by a tenth of the
		 * spread: equal almost everywhere, yet no two rows have the same result */
		double v = j->base_row[i % (size_t)j->rowlen];
		if (!kg_prng_below(r, 16))
			v += 0.1 * j->scale * kg_prng_normal(r);
		return v;
	}
	case KG_CLASS_COUNT_:
		break;
	}
	return 0.0;
}

static void fill_chunk(const struct fill_job *shared, size_t chunk)
{
	struct fill_job local = *shared, *j = &local; /* per-chunk caches (constant_rows) */
	j->cur_row = -1;
	kg_prng r;
	kg_prng_init(&r, j->key, STREAM(j->tensor, (uint32_t)chunk + 1), 0);
	size_t lo = chunk * CHUNK, hi = lo + CHUNK < j->n ? lo + CHUNK : j->n;
	if (j->dt == KG_F32) { /* the common dtype, stored without a switch per element */
		for (size_t i = lo; i < hi; i++)
			((float *)j->dst)[i] = (float)sample(j, &r, i);
		return;
	}
	if (kg_dtype_is_float(j->dt)) {
		for (size_t i = lo; i < hi; i++)
			kg_store(j->dst, j->dt, i, sample(j, &r, i));
		return;
	}
	for (size_t i = lo; i < hi; i++) {
		double v;
		if (j->c == KG_CLASS_ZEROS)
			v = 0;
		else if (j->c == KG_CLASS_ONES)
			v = 1;
		else if (j->dt == KG_U8)
			v = (double)kg_prng_below(&r, 256);
		else
			v = (double)kg_prng_below(&r, 2001) - 1000.0;
		kg_store(j->dst, j->dt, i, v);
	}
}

static void *fill_worker(void *arg)
{
	struct fill_job *j = arg;
	size_t nchunks = (j->n + CHUNK - 1) / CHUNK;
	for (;;) {
		pthread_mutex_lock(&j->lock);
		size_t c = j->next_chunk++;
		pthread_mutex_unlock(&j->lock);
		if (c >= nchunks)
			return NULL;
		fill_chunk(j, c);
	}
}

double kg_inputs_large_mean_lo(kg_dtype dt)
{
	/* fp32: |mean| in [16, 32) with a unit spread. One-pass fp32 variance of such rows is off by
	 * 1e-3 or more (E[x^2] ~ 500 cancels down to 1); an honest fp32 mean of a row of a hundred is off
	 * by ~1e-5, well inside the tolerances (at 64 and more, honest fp32 sums fail them too).
	 * Half precisions: 4 and up. */
	return dt == KG_F32 ? 16.0 : 4.0;
}

static int shapes_the_data(enum kg_input_class c)
{
	return c == KG_CLASS_ZEROS || c == KG_CLASS_ONES || c == KG_CLASS_SPECIAL || c == KG_CLASS_IDENTITY ||
	       c == KG_CLASS_SORTED || c == KG_CLASS_LARGE_MEAN || c == KG_CLASS_CONSTANT_ROWS ||
	       c == KG_CLASS_NEAR_DUPLICATE;
}

void kg_inputs_fill(void *dst, kg_dtype dt, size_t n, const int64_t *shape, int ndim, enum kg_role role,
		    enum kg_input_class c, const kg_key *trial_key, int tensor)
{
	struct fill_job j = {.dst = dst, .dt = dt, .n = n, .c = c, .key = trial_key, .tensor = tensor};
	double *base = NULL;
	if (role != KG_ROLE_ACTIVATION && shapes_the_data(c))
		j.c = KG_CLASS_NORMAL;
	j.rowlen = ndim > 0 ? shape[ndim - 1] : 1;
	if (ndim >= 2 && shape[ndim - 1] == shape[ndim - 2]) {
		j.square = 1;
		j.rows_per_mat = shape[ndim - 2];
		j.cols = shape[ndim - 1];
	}
	/* Per-tensor offset and scale, drawn from the tensor's own stream. */
	kg_prng r;
	kg_prng_init(&r, trial_key, STREAM(tensor, S_PARAMS), 0);
	j.offset = 2.0 * kg_prng_uniform(&r) - 1.0;
	j.scale = pow(10.0, 1.2 * kg_prng_uniform(&r) - 0.6);
	j.magnitude = dt == KG_F16 ? 2e3 : dt == KG_BF16 ? 1e6 : 1e4;
	if (dt == KG_F16)
		j.offset *= 0.5;
	if (j.c == KG_CLASS_LARGE_MEAN) {
		double lo = kg_inputs_large_mean_lo(dt);
		j.offset = (kg_prng_next(&r) & 1 ? lo : -lo) * (1.0 + kg_prng_uniform(&r));
		j.scale = 1.0;
	}
	if (j.c == KG_CLASS_NEAR_DUPLICATE) {
		if (j.rowlen > MAX_BASE_ROW || !(base = malloc((size_t)j.rowlen * sizeof(*base)))) {
			j.c = KG_CLASS_NORMAL; /* a row too long to keep: plain data, still a valid trial */
		} else {
			kg_prng br;
			kg_prng_init(&br, trial_key, STREAM(tensor, S_BASE_ROW), 0);
			for (int64_t k = 0; k < j.rowlen; k++)
				base[k] = j.offset + j.scale * kg_prng_normal(&br);
			j.base_row = base;
		}
	}
	pthread_mutex_init(&j.lock, NULL);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nchunks = (n + CHUNK - 1) / CHUNK;
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
