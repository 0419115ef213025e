/* Honest but unusual: each row's exponentials are computed once, kept in a `static __thread`
 * scratch buffer that grows with the widest row seen and lives across calls, then scaled. Built as
 * a shared object with -fPIC, the thread-local access goes through __tls_get_addr (the
 * general-dynamic TLS model of a dlopen'ed module), and the block behind it is allocated by the
 * dynamic loader on the first access from each thread: here, the runner's sealed main thread.
 * Accepted under every policy (kgate 0.2 refused the import as static.forbidden_symbol). */
#include <kgate/kernel.h>
#include <math.h>
#include <stdlib.h>

KG_CANDIDATE;

static __thread float *scratch;
static __thread int64_t scratch_len;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	if (n_in != 1 || n_out != 1)
		return -22;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	if (cols > scratch_len) {
		float *p = realloc(scratch, (size_t)cols * sizeof(*p));
		if (!p)
			return -12;
		scratch = p;
		scratch_len = cols;
	}
	float *e = scratch;
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols;
		float m = -INFINITY;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(xr[c]);
			m = fmaxf(m, xr[c]);
		}
		/* a row of -inf (or one holding +inf) gives NaN here, as the reference's does */
		float s = 0;
		for (int64_t c = 0; c < cols; c++)
			s += e[c] = expf(xr[c] - m);
		float inv = 1.0f / s;
		for (int64_t c = 0; c < cols; c++)
			yr[c] = nan ? NAN : e[c] * inv;
	}
	return 0;
}
