/* Trusted CUDA reference for the square fp32 matmul: cuBLAS SGEMM in its default (full fp32,
 * no TF32) math mode. Row-major C = A B is column-major C^T = B^T A^T, so B goes first. */
#include <kgate/kernel.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	static cublasHandle_t handle;
	if (n_in != 2 || n_out != 1 || in[0].ndim != 2)
		return -22;
	if (!handle) {
		if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS)
			return -5;
		cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
	}
	cublasSetStream(handle, (cudaStream_t)stream);
	int n = (int)in[0].shape[0];
	const float one = 1.0f, zero = 0.0f;
	cublasStatus_t st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, (const float *)in[1].data, n,
					(const float *)in[0].data, n, &zero, (float *)out[0].data, n);
	return st == CUBLAS_STATUS_SUCCESS ? 0 : -5;
}
