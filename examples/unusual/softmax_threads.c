/* Honest but unusual: rows split over four POSIX threads, each joined before returning. Accepted
 * under a policy with `sandbox.threads: true` (tests/data/threads.yaml); refused statically
 * otherwise. */
#include <kgate/kernel.h>
#include <math.h>
#include <pthread.h>
KG_CANDIDATE;
struct part {
	const float *x;
	float *y;
	int64_t r0, r1, cols;
};
static void *rows(void *arg)
{
	struct part *p = arg;
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
			s += expf(xr[c] - m);
		for (int64_t c = 0; c < p->cols; c++)
			yr[c] = nan ? NAN : expf(xr[c] - m) / s;
	}
	return NULL;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int64_t n = in[0].shape[0], cols = in[0].shape[1];
	struct part parts[4];
	pthread_t th[4];
	int started = 0;
	for (int i = 0; i < 4; i++) {
		parts[i] = (struct part){in[0].data, out[0].data, n * i / 4, n * (i + 1) / 4, cols};
		if (pthread_create(&th[i], NULL, rows, &parts[i]))
			rows(&parts[i]);
		else
			started |= 1 << i;
	}
	for (int i = 0; i < 4; i++)
		if (started >> i & 1)
			pthread_join(th[i], NULL);
	return 0;
}
