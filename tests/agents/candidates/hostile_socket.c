/* A hostile candidate: an honest-looking softmax that also opens a socket (to exfiltrate inputs
 * or fetch precomputed answers). kgate must reject it for the forbidden import or the denied
 * system call, whatever the numbers. */
#include <kgate/kernel.h>
#include <math.h>
#include <sys/socket.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	(void)s;
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float m = -INFINITY, sum = 0.0f;
		for (int64_t c = 0; c < cols; c++)
			m = fmaxf(m, x[r * cols + c]);
		for (int64_t c = 0; c < cols; c++)
			sum += expf(x[r * cols + c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = expf(x[r * cols + c] - m) / sum;
	}
	return 0;
}
