# kgate test candidate (KernelBench ModelNew with a CUDA kernel through load_inline): an honest
# matmul. Where kgate's torch has no CUDA (Debian's torch 1.13) its build says so (a compile error,
# never "not verified": the module's own words decide that it has CUDA sources, and a candidate must
# not turn its rejection into exit 3 by claiming some); on a GPU host it is built with nvcc and run on
# kgate-device's memory (tests/gpu/kernelbench35.sh).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
__global__ void mm(const float *a, const float *b, float *c, int n) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, k = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n && k < n) {
        float s = 0;
        for (int i = 0; i < n; i++) s += a[r * n + i] * b[i * n + k];
        c[r * n + k] = s;
    }
}
torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b) {
    int n = a.size(0);
    auto c = torch::empty({n, n}, a.options());
    dim3 t(16, 16), g((n + 15) / 16, (n + 15) / 16);
    mm<<<g, t>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    return c;
}
"""

ext = load_inline(name="kg_mm_cuda", cpp_sources="torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=cuda_src, functions=["matmul_cuda"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.matmul_cuda(A.contiguous(), B.contiguous())
