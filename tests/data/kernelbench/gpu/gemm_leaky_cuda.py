# kgate test candidate (KernelBench ModelNew, CUDA through load_inline), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest answer to KernelBench's level-2 12_Gemm_Multiply_LeakyReLU:
# the GEMM by cuBLAS (torch's addmm, fp32, TF32 off as torch's default), then one fused kernel for
# the multiplier and the LeakyReLU in place, on torch's current stream. Its nn.Linear has the Model's
# parameter names and shapes: they are bound to the Model's.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>

__global__ void scale_leaky(float *__restrict__ y, long long n, float mult, float slope) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = y[i] * mult;
        y[i] = v > 0.f ? v : v * slope;
    }
}

torch::Tensor scale_leaky_cuda(torch::Tensor y, double mult, double slope) {
    long long n = y.numel();
    if (n == 0)
        return y;
    long long blocks = (n + 255) / 256;
    cudaStream_t st = c10::cuda::getCurrentCUDAStream();
    scale_leaky<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, st>>>(y.data_ptr<float>(), n, (float)mult,
                                                                            (float)slope);
    return y;
}
"""

ext = load_inline(name="kg35_gemm_leaky", cpp_sources="torch::Tensor scale_leaky_cuda(torch::Tensor y, double mult, double slope);",
                  cuda_sources=cuda_src, functions=["scale_leaky_cuda"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x.contiguous(), self.gemm.weight.t())
        return ext.scale_leaky_cuda(y, self.multiplier, self.negative_slope)
