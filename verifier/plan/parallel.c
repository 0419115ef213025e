/* kg_parallel_for: static partitioning over pthreads; falls back to the calling thread alone
 * when threads cannot be started, so it never fails. */
#include "verifier/plan/parallel.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

struct par_part {
	void (*fn)(void *, int, size_t, size_t);
	void *arg;
	int part;
	size_t lo, hi;
};

static void *par_run(void *p)
{
	struct par_part *pp = p;
	pp->fn(pp->arg, pp->part, pp->lo, pp->hi);
	return NULL;
}

int kg_parallel_for(size_t n, size_t min_chunk, void (*fn)(void *arg, int part, size_t lo, size_t hi), void *arg)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	size_t parts = ncpu > 0 ? (size_t)ncpu : 1;
	if (parts > KG_PAR_MAX_PARTS)
		parts = KG_PAR_MAX_PARTS;
	if (min_chunk < 1)
		min_chunk = 1;
	if (n / min_chunk < parts)
		parts = n / min_chunk ? n / min_chunk : 1;
	struct par_part pp[KG_PAR_MAX_PARTS];
	pthread_t th[KG_PAR_MAX_PARTS];
	int started[KG_PAR_MAX_PARTS] = {0};
	for (size_t i = 0; i < parts; i++) {
		pp[i] = (struct par_part){fn, arg, (int)i, n * i / parts, n * (i + 1) / parts};
		if (i > 0 && !pthread_create(&th[i], NULL, par_run, &pp[i]))
			started[i] = 1;
	}
	par_run(&pp[0]);
	for (size_t i = 1; i < parts; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else
			par_run(&pp[i]);
	}
	return (int)parts;
}

struct copy_job {
	unsigned char *dst;
	const unsigned char *src;
};

static void copy_part(void *arg, int part, size_t lo, size_t hi)
{
	(void)part;
	struct copy_job *j = arg;
	memcpy(j->dst + lo, j->src + lo, hi - lo);
}

void kg_parallel_copy(void *dst, const void *src, size_t n)
{
	struct copy_job j = {dst, src};
	kg_parallel_for(n, 8u << 20, copy_part, &j);
}
