/* A plausible but wrong softmax: it skips the max subtraction, so exp overflows to Inf on large
 * inputs and the row becomes NaN. It passes small random tests; kgate's large class catches it. */
#include <kgate/kernel.h>
#include <math.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)stream;
	(void)n_in;
	(void)n_out;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float s = 0.0f;
		for (int64_t c = 0; c < cols; c++)
			s += expf(x[r * cols + c]);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = expf(x[r * cols + c]) / s;
	}
	return 0;
}
