/* Trusted CPU reference for the square matmul: every output accumulated in double over k in order,
 * then rounded once, so the difference measured is the candidate's. Fast enough for the nominal
 * N = 4096 (69 G multiply-adds; a plain row loop took 70 s a call and the default policy makes
 * dozens): tiles of 16 rows x 256 columns of accumulators stay in L1 while B's strip streams past
 * once per tile, row tiles are shared out over the cores, and the loop is compiled a second time
 * for AVX2+FMA where the CPU has them (a fused multiply-add in double only rounds less). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <kgate/kernel.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

KG_CANDIDATE;

enum { IB = 16, JB = 256, MAX_THREADS = 64 };

struct job {
	const float *a, *b;
	float *c;
	int64_t n;
	int64_t next; /* the next row tile to take */
	pthread_mutex_t lock;
};

#define TILE_BODY                                                                                   \
	for (int64_t j0 = 0; j0 < n; j0 += JB) {                                                    \
		int64_t nj = n - j0 < JB ? n - j0 : JB;                                             \
		for (int64_t ii = 0; ii < ni; ii++)                                                 \
			for (int64_t jj = 0; jj < nj; jj++)                                         \
				acc[ii][jj] = 0;                                                    \
		for (int64_t k = 0; k < n; k++) {                                                   \
			const float *brow = b + k * n + j0;                                         \
			for (int64_t ii = 0; ii < ni; ii++) {                                       \
				double aik = a[(i0 + ii) * n + k];                                  \
				for (int64_t jj = 0; jj < nj; jj++)                                 \
					acc[ii][jj] += aik * brow[jj];                              \
			}                                                                           \
		}                                                                                   \
		for (int64_t ii = 0; ii < ni; ii++)                                                 \
			for (int64_t jj = 0; jj < nj; jj++)                                         \
				c[(i0 + ii) * n + j0 + jj] = (float)acc[ii][jj];                    \
	}

static void tile_plain(const float *a, const float *b, float *c, int64_t n, int64_t i0, int64_t ni,
		       double acc[IB][JB])
{
	TILE_BODY
}

__attribute__((target("avx2,fma"))) static void tile_avx2(const float *a, const float *b, float *c, int64_t n,
							   int64_t i0, int64_t ni, double acc[IB][JB])
{
	TILE_BODY
}

static void *worker(void *arg)
{
	struct job *j = arg;
	double(*acc)[JB] = malloc(sizeof(double[IB][JB]));
	if (!acc)
		return (void *)1;
	int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	for (;;) {
		pthread_mutex_lock(&j->lock);
		int64_t i0 = j->next;
		j->next += IB;
		pthread_mutex_unlock(&j->lock);
		if (i0 >= j->n)
			break;
		int64_t ni = j->n - i0 < IB ? j->n - i0 : IB;
		if (avx2)
			tile_avx2(j->a, j->b, j->c, j->n, i0, ni, acc);
		else
			tile_plain(j->a, j->b, j->c, j->n, i0, ni, acc);
	}
	free(acc);
	return NULL;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 2 || n_out != 1 || in[0].ndim != 2)
		return -22;
	struct job j = {.a = in[0].data, .b = in[1].data, .c = out[0].data, .n = in[0].shape[0]};
	pthread_mutex_init(&j.lock, NULL);
	/* the CPUs this process may run on (sched_getaffinity: sysconf would read /sys, which the
	 * sealed runner cannot open once loaded) */
	cpu_set_t set;
	long cpus = sched_getaffinity(0, sizeof(set), &set) ? 1 : CPU_COUNT(&set);
	int64_t tiles = (j.n + IB - 1) / IB;
	int nt = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
	if (nt > tiles)
		nt = tiles > 0 ? (int)tiles : 1;
	pthread_t th[MAX_THREADS];
	int started = 0, failed = 0;
	for (int t = 1; t < nt; t++) {
		if (pthread_create(&th[started], NULL, worker, &j))
			break; /* fewer threads: the tiles left are taken by those running */
		started++;
	}
	failed |= worker(&j) != NULL;
	for (int t = 0; t < started; t++) {
		void *rv;
		pthread_join(th[t], &rv);
		failed |= rv != NULL;
	}
	pthread_mutex_destroy(&j.lock);
	return failed ? -12 : 0;
}
