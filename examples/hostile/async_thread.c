/* Shortcut: return at once and let a thread finish the work afterwards, so the timer sees almost
 * nothing. Needs a policy that allows threads; kgate re-reads the outputs after a delay:
 * check.async_escape. (Under a policy without threads: static.forbidden_symbol.) */
#include <kgate/kernel.h>
#include <math.h>
#include <pthread.h>
KG_CANDIDATE;
struct job {
	const float *x;
	float *y;
	int64_t rows, cols;
};
static struct job job;
static void *work(void *arg)
{
	struct job *j = arg;
	for (volatile long spin = 0; spin < 20000000; spin++)
		; /* a few milliseconds: long enough that the call has returned */
	for (int64_t r = 0; r < j->rows; r++) {
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < j->cols; c++) {
			nan |= isnan(j->x[r * j->cols + c]);
			m = fmaxf(m, j->x[r * j->cols + c]);
		}
		for (int64_t c = 0; c < j->cols; c++)
			s += expf(j->x[r * j->cols + c] - m);
		for (int64_t c = 0; c < j->cols; c++)
			j->y[r * j->cols + c] = nan ? NAN : expf(j->x[r * j->cols + c] - m) / s;
	}
	return NULL;
}
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	pthread_t t;
	job = (struct job){in[0].data, out[0].data, in[0].shape[0], in[0].shape[1]};
	/* The first row is written now so the output does not look untouched. */
	float *y = out[0].data;
	for (int64_t c = 0; c < job.cols; c++)
		y[c] = 0;
	return pthread_create(&t, NULL, work, &job);
}
