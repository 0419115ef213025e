/* A kernel that never ends. The parent's deadline kills the sandboxed process (and with it the
 * context); the GPU must stay usable for the next candidate: sandbox.timeout. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

__global__ static void spin(float *y)
{
	volatile float *v = y;
	for (;;)
		v[threadIdx.x] += 1.0f;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)n_out;
	spin<<<1, 32, 0, (cudaStream_t)stream>>>((float *)out[0].data);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
