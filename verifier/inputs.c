/* Input generation. Large tensors are filled in 1 Mi-element chunks, each from its own derived
 * stream, on a few threads: the result depends only on the seed, never on the thread count. */
#include "verifier/inputs.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "verifier/dtype.h"

#define CHUNK (1u << 20)

struct fill_job {
	void *dst;
	kg_dtype dt;
	size_t n;
	int64_t rowlen; /* last dimension */
	int64_t rows_per_mat, cols; /* identity: shape of the trailing 2-D matrix */
	int square;
	enum kg_input_class c;
	uint64_t seed;
	double offset, scale, magnitude;
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
	case KG_CLASS_COUNT_:
		break;
	}
	return 0.0;
}

static void fill_chunk(struct fill_job *j, size_t chunk)
{
	kg_prng r;
	kg_prng_seed(&r, kg_seed_derive(j->seed, chunk + 1));
	size_t lo = chunk * CHUNK, hi = lo + CHUNK < j->n ? lo + CHUNK : j->n;
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

void kg_inputs_fill(void *dst, kg_dtype dt, size_t n, const int64_t *shape, int ndim, enum kg_role role,
		    enum kg_input_class c, uint64_t seed)
{
	struct fill_job j = {.dst = dst, .dt = dt, .n = n, .c = c, .seed = seed};
	if (role != KG_ROLE_ACTIVATION &&
	    (c == KG_CLASS_ZEROS || c == KG_CLASS_ONES || c == KG_CLASS_SPECIAL || c == KG_CLASS_IDENTITY ||
	     c == KG_CLASS_SORTED))
		j.c = KG_CLASS_NORMAL;
	j.rowlen = ndim > 0 ? shape[ndim - 1] : 1;
	if (ndim >= 2 && shape[ndim - 1] == shape[ndim - 2]) {
		j.square = 1;
		j.rows_per_mat = shape[ndim - 2];
		j.cols = shape[ndim - 1];
	}
	/* Per-tensor offset and scale, drawn from the tensor's own stream. */
	kg_prng r;
	kg_prng_seed(&r, seed);
	j.offset = 2.0 * kg_prng_uniform(&r) - 1.0;
	j.scale = pow(10.0, 1.2 * kg_prng_uniform(&r) - 0.6);
	j.magnitude = dt == KG_F16 ? 2e3 : dt == KG_BF16 ? 1e6 : 1e4;
	if (dt == KG_F16)
		j.offset *= 0.5;
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
}
