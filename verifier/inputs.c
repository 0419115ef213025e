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
#define S_SPIKE 0xfffffcu
#define S_MIX 0xfffffbu
#define MAX_BASE_ROW (1u << 24) /* near_duplicate keeps one row in memory */

/* What one row holds: the tensor's class and parameters, or, in a mixed tensor, the row's own. */
struct row_params {
	enum kg_input_class c;
	double offset, scale;
	double value; /* constant_rows: the row's one value */
	int64_t spike_col; /* spiked: where the outlier sits, and its value */
	double spike;
};

struct fill_job {
	void *dst;
	kg_dtype dt;
	size_t n;
	int64_t rowlen; /* last dimension */
	int64_t rows_per_mat, cols; /* identity: shape of the trailing 2-D matrix */
	int square;
	enum kg_input_class c;
	enum kg_input_class mix[KG_CLASS_COUNT_]; /* mixed: the classes a row may take */
	int n_mix;
	const kg_key *key;
	int tensor;
	double offset, scale, magnitude;
	const double *base_row; /* near_duplicate: the row every row is a near copy of */
	int per_row; /* the class draws something per row (constant_rows, spiked, mixed) */
	int64_t cur_row; /* the row whose parameters are cached in row (per chunk) */
	struct row_params row;
	size_t next_chunk; /* shared cursor */
	pthread_mutex_t lock;
};

/* large_mean's offset and scale, from the tensor's (or a mixed row's) parameter stream */
static void large_mean_params(kg_dtype dt, kg_prng *r, double *offset, double *scale);

/* A row's parameters, from streams of the row's own (a row may straddle chunks, so nothing may
 * come from a chunk's stream): a mixed row's class and offset and scale, drawn as a tensor's
 * would be; a constant row's value; a spiked row's outlier. */
static void row_enter(struct fill_job *j, int64_t row)
{
	struct row_params *p = &j->row;
	p->c = j->c;
	p->offset = j->offset;
	p->scale = j->scale;
	if (j->c == KG_CLASS_MIXED) {
		kg_prng m;
		kg_prng_init(&m, j->key, STREAM(j->tensor, S_MIX), (uint64_t)row);
		p->c = j->mix[kg_prng_below(&m, (uint64_t)j->n_mix)];
		if (p->c == KG_CLASS_LARGE_MEAN) {
			large_mean_params(j->dt, &m, &p->offset, &p->scale);
		} else if (p->c != KG_CLASS_NEAR_DUPLICATE) { /* a near copy keeps the base row's */
			p->offset = (2.0 * kg_prng_uniform(&m) - 1.0) * (j->dt == KG_F16 ? 0.5 : 1.0);
			p->scale = pow(10.0, 1.2 * kg_prng_uniform(&m) - 0.6);
		}
	}
	if (p->c == KG_CLASS_CONSTANT_ROWS) {
		kg_prng rr;
		kg_prng_init(&rr, j->key, STREAM(j->tensor, S_ROW), (uint64_t)row);
		p->value = p->offset + p->scale * kg_prng_normal(&rr);
	} else if (p->c == KG_CLASS_SPIKED) {
		/* One outlier per row at a secret column, 100 to 120 spreads (at least 100) from the
		 * row's offset: exp() of it overflows fp32 (past 88.7) without the max subtracted, and
		 * so does exp() of it less any other element of the row (at most ~5 spreads from the
		 * offset), so no guard that looks at some elements rather than the maximum survives;
		 * finite in every float dtype (|value| < 500, f16's largest is 65504). */
		kg_prng sr;
		kg_prng_init(&sr, j->key, STREAM(j->tensor, S_SPIKE), (uint64_t)row);
		p->spike_col = (int64_t)kg_prng_below(&sr, (uint64_t)j->rowlen);
		double sign = kg_prng_next(&sr) & 1 ? 1.0 : -1.0;
		p->spike = p->offset + sign * fmax(1.0, p->scale) * (100.0 + 20.0 * kg_prng_uniform(&sr));
	}
}

static double sample(struct fill_job *j, kg_prng *r, size_t i)
{
	int is_f16 = j->dt == KG_F16;
	if (j->per_row) {
		int64_t row = (int64_t)(i / (size_t)j->rowlen);
		if (row != j->cur_row) {
			row_enter(j, row);
			j->cur_row = row;
		}
	}
	const struct row_params *p = &j->row;
	switch (p->c) {
	case KG_CLASS_NORMAL:
		return p->offset + p->scale * kg_prng_normal(r);
	case KG_CLASS_UNIFORM:
		return p->offset + p->scale * (2.0 * kg_prng_uniform(r) - 1.0);
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
		return -fabs(p->scale * kg_prng_normal(r)) - 1e-3;
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
		return p->offset + p->scale * kg_prng_normal(r);
	case KG_CLASS_CONSTANT_ROWS:
		return p->value;
	case KG_CLASS_NEAR_DUPLICATE: {
		/* every row the same base row, but for about one element in 16 moved by a tenth of the
		 * spread: equal almost everywhere, yet no two rows have the same result */
		double v = j->base_row[i % (size_t)j->rowlen];
		if (!kg_prng_below(r, 16))
			v += 0.1 * p->scale * kg_prng_normal(r);
		return v;
	}
	case KG_CLASS_SPIKED:
		if ((int64_t)(i % (size_t)j->rowlen) == p->spike_col)
			return p->spike;
		return p->offset + p->scale * kg_prng_normal(r);
	case KG_CLASS_MIXED: /* row_enter gave the row a class of its own */
	case KG_CLASS_COUNT_:
		break;
	}
	return 0.0;
}

static void fill_chunk(const struct fill_job *shared, size_t chunk)
{
	struct fill_job local = *shared, *j = &local; /* per-chunk row caches */
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

static void large_mean_params(kg_dtype dt, kg_prng *r, double *offset, double *scale)
{
	double lo = kg_inputs_large_mean_lo(dt);
	*offset = (kg_prng_next(r) & 1 ? lo : -lo) * (1.0 + kg_prng_uniform(r));
	*scale = 1.0;
}

static int shapes_the_data(enum kg_input_class c)
{
	return c == KG_CLASS_ZEROS || c == KG_CLASS_ONES || c == KG_CLASS_SPECIAL || c == KG_CLASS_IDENTITY ||
	       c == KG_CLASS_SORTED || c == KG_CLASS_LARGE_MEAN || c == KG_CLASS_CONSTANT_ROWS ||
	       c == KG_CLASS_NEAR_DUPLICATE || c == KG_CLASS_SPIKED || c == KG_CLASS_MIXED;
}

void kg_inputs_fill(void *dst, kg_dtype dt, size_t n, const int64_t *shape, int ndim, enum kg_role role,
		    enum kg_input_class c, unsigned mix, const kg_key *trial_key, int tensor)
{
	struct fill_job j = {.dst = dst, .dt = dt, .n = n, .c = c, .key = trial_key, .tensor = tensor};
	double *base = NULL;
	if (role != KG_ROLE_ACTIVATION && shapes_the_data(c))
		j.c = KG_CLASS_NORMAL;
	j.rowlen = ndim > 0 && shape[ndim - 1] > 0 ? shape[ndim - 1] : 1;
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
	if (j.c == KG_CLASS_LARGE_MEAN)
		large_mean_params(dt, &r, &j.offset, &j.scale);
	/* A mixed tensor's rows take the seeded row-wise classes among those given (the plan's):
	 * none of zeros, ones or identity, so no row of it was seen in another trial; special only
	 * where the task defines it. */
	int mix_dup = 0;
	if (j.c == KG_CLASS_MIXED) {
		for (int k = 0; k < KG_CLASS_COUNT_; k++)
			if ((mix >> k & 1) && kg_class_is_seeded((enum kg_input_class)k) && k != KG_CLASS_MIXED &&
			    (k != KG_CLASS_NEAR_DUPLICATE || j.rowlen <= MAX_BASE_ROW)) {
				j.mix[j.n_mix++] = (enum kg_input_class)k;
				mix_dup |= k == KG_CLASS_NEAR_DUPLICATE;
			}
		if (!j.n_mix)
			j.mix[j.n_mix++] = KG_CLASS_NORMAL;
	}
	if (j.c == KG_CLASS_NEAR_DUPLICATE || mix_dup) {
		if (j.rowlen > MAX_BASE_ROW || !(base = malloc((size_t)j.rowlen * sizeof(*base)))) {
			/* a row too long to keep: plain data, still a valid trial */
			if (j.c == KG_CLASS_NEAR_DUPLICATE)
				j.c = KG_CLASS_NORMAL;
			for (int k = 0; k < j.n_mix; k++)
				if (j.mix[k] == KG_CLASS_NEAR_DUPLICATE)
					j.mix[k] = KG_CLASS_NORMAL;
		} else {
			kg_prng br;
			kg_prng_init(&br, trial_key, STREAM(tensor, S_BASE_ROW), 0);
			for (int64_t k = 0; k < j.rowlen; k++)
				base[k] = j.offset + j.scale * kg_prng_normal(&br);
			j.base_row = base;
		}
	}
	j.per_row = j.c == KG_CLASS_CONSTANT_ROWS || j.c == KG_CLASS_SPIKED || j.c == KG_CLASS_MIXED;
	j.cur_row = -1;
	row_enter(&j, 0); /* the tensor's own parameters, for the classes that take nothing per row */
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
