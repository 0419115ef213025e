/* Shortcut: zero the input, then write the answer for zeros, so a harness comparing against a
 * reference computed afterwards on the same (now zeroed) memory matches. A host arena's inputs are
 * read-only in the candidate's process: the store faults, sandbox.crash (on a device arena the
 * comparison with the trusted copy: check.input_modified). */
#include <kgate/kernel.h>
#include <string.h>
KG_CANDIDATE;
int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	memset(in[0].data, 0, (size_t)(rows * cols) * sizeof(float));
	float *y = out[0].data;
	for (int64_t i = 0; i < rows * cols; i++)
		y[i] = 1.0f / (float)cols;
	return 0;
}
