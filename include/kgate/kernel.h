/* kgate candidate ABI, version 1.
 * A candidate is one source file (.c for the CPU backend, .cu for CUDA) that includes this header
 * and exports kg_forward and kg_abi_version. Everything here is plain C so nvcc and cc agree. */
#ifndef KGATE_KERNEL_H
#define KGATE_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KG_ABI_VERSION 1
#define KG_MAX_DIMS 8

typedef enum kg_dtype {
	KG_F32 = 0,
	KG_F16 = 1,
	KG_BF16 = 2,
	KG_I32 = 3,
	KG_I64 = 4,
	KG_U8 = 5,
	/* one byte holding 0 or 1 (torch.bool, C's _Bool, C++'s bool); added within version 1: a
	 * candidate built before it never sees one, since only a task that declares one has it */
	KG_BOOL = 6,
} kg_dtype;

/* data is a host pointer on the CPU backend, a device pointer on CUDA. stride counts elements;
 * v1 tensors are always row-major contiguous, stride is given so that candidates need not
 * recompute it. A scalar (a 0-dim tensor: a loss, a BatchNorm's step count) has ndim 0 and one
 * element; kg_numel gives 1 for it. n_in and n_out are whatever the task declares (a whole model's
 * parameters are inputs: hundreds of them). */
typedef struct kg_tensor {
	void *data;
	int32_t dtype; /* kg_dtype */
	int32_t ndim;
	int64_t shape[KG_MAX_DIMS];
	int64_t stride[KG_MAX_DIMS];
} kg_tensor;

#if defined(__GNUC__) || defined(__clang__)
#define KG_EXPORT __attribute__((visibility("default")))
#else
#define KG_EXPORT
#endif

/* Every candidate writes KG_CANDIDATE once, at file scope: it exports kg_abi_version so that a
 * candidate built against another ABI is refused before kg_forward is ever called. */
#ifdef __cplusplus
#define KG_CANDIDATE extern "C" KG_EXPORT const int kg_abi_version = KG_ABI_VERSION
#else
#define KG_CANDIDATE KG_EXPORT const int kg_abi_version = KG_ABI_VERSION
#endif

/* Inputs and outputs come in the order the task manifest declares; weights and biases are inputs.
 * stream is the cudaStream_t to launch on (NULL on the CPU). Returns 0 on success. */
KG_EXPORT int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream);

/* A task's trusted reference may export kg_error_terms too (the manifest's `terms: reference`):
 * the same arguments, and it writes each output element's allowance in place of the result, how
 * far an honest kernel may land from the exact value there (policy/SCHEMA.md, point 5). kgate
 * never calls it on a candidate. */
KG_EXPORT int kg_error_terms(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream);

static inline int64_t kg_numel(const kg_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

#ifdef __cplusplus
}
#endif
#endif
