/* Shortcut: a no-op kernel that relies on the output buffer still holding an earlier result
 * (the reference's, in harnesses that reuse device memory). kgate poisons the device outputs
 * before every call: check.unwritten_output. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

__global__ static void nothing(float *y)
{
	(void)y;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)n_out;
	nothing<<<1, 1, 0, (cudaStream_t)stream>>>((float *)out[0].data);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
