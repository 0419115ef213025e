/* Builds without the CUDA backend answer "not available" instead of failing to link; the CUDA
 * backend (runner/cuda.c) replaces this file when it is part of the build. */
#include <stddef.h>

#include "runner/backend.h"

struct kg_rbackend *kg_rbackend_cuda(void)
{
	return NULL;
}
