/* Honest but unusual: rows split over twelve POSIX threads, each with a scratch row from malloc,
 * joined before returning. glibc gives the ninth thread that allocates a malloc arena of its own
 * only after reading the CPU count from /sys (its arena limit), an open the sealed runner refuses:
 * kgate 0.2 killed this (and the matmul reference on 16 cores at N=153) with SIGSYS. The runner
 * now sets that limit before it seals itself. Accepted under `sandbox.threads: true`. */
#include <kgate/kernel.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
KG_CANDIDATE;
enum { THREADS = 12 };
/* every thread holds its scratch row until all have one: none can hand its arena to another */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int arrived, expected;
static void all_allocated(void)
{
	pthread_mutex_lock(&mu);
	arrived++;
	pthread_cond_broadcast(&cv);
	while (arrived < expected)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}
struct part {
	const float *x;
	float *y;
	int64_t r0, r1, cols;
	int failed;
};
static void *rows(void *arg)
{
	struct part *p = arg;
	float *e = malloc((size_t)p->cols * sizeof(float));
	all_allocated();
	if (!e) {
		p->failed = 1;
		return NULL;
	}
	for (int64_t r = p->r0; r < p->r1; r++) {
		const float *xr = p->x + r * p->cols;
		float *yr = p->y + r * p->cols;
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < p->cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		for (int64_t c = 0; c < p->cols; c++)
			s += e[c] = expf(xr[c] - m);
		for (int64_t c = 0; c < p->cols; c++)
			yr[c] = nan ? NAN : e[c] / s;
	}
	free(e);
	return NULL;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int64_t n = in[0].shape[0], cols = in[0].shape[1];
	struct part parts[THREADS];
	pthread_t th[THREADS];
	int started = 0, failed = 0;
	arrived = 0;
	expected = THREADS;
	for (int i = 0; i < THREADS; i++) {
		parts[i] = (struct part){in[0].data, out[0].data, n * i / THREADS, n * (i + 1) / THREADS, cols, 0};
		if (pthread_create(&th[i], NULL, rows, &parts[i]))
			break;
		started++;
	}
	if (started < THREADS) {
		/* no waiting for threads that do not exist */
		pthread_mutex_lock(&mu);
		expected = started;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		failed = 1;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		failed |= parts[i].failed;
	}
	return failed ? -12 : 0;
}
