# kgate test candidate (KernelBench ModelNew, CUDA through load_inline), written for kgate's GPU tests
# (tests/gpu/kernelbench35.sh): an honest answer to KernelBench's level-3 1_MLP: each layer's product
# by cuBLAS (torch.mm, fp32), its bias and ReLU fused in one kernel of its own, on torch's current
# stream. Its layers are an nn.Sequential of the Model's shape (network.0.weight, ...): its parameters
# are bound to the Model's.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>

__global__ void bias_act(float *__restrict__ y, const float *__restrict__ b, long long rows, long long cols, int relu) {
    long long n = rows * cols;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = y[i] + b[i % cols];
        y[i] = relu && v < 0.f ? 0.f : v;
    }
}

torch::Tensor bias_act_cuda(torch::Tensor y, torch::Tensor b, bool relu) {
    auto bc = b.contiguous();
    long long rows = y.size(0), cols = y.size(1);
    if (rows * cols == 0)
        return y;
    long long blocks = (rows * cols + 255) / 256;
    cudaStream_t st = c10::cuda::getCurrentCUDAStream();
    bias_act<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, st>>>(y.data_ptr<float>(), bc.data_ptr<float>(), rows,
                                                                         cols, relu ? 1 : 0);
    return y;
}
"""

ext = load_inline(name="kg35_mlp", cpp_sources="torch::Tensor bias_act_cuda(torch::Tensor y, torch::Tensor b, bool relu);",
                  cuda_sources=cuda_src, functions=["bias_act_cuda"])


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        cur = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(cur, size))
            layers.append(nn.ReLU())
            cur = size
        layers.append(nn.Linear(cur, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        linears = [m for m in self.network if isinstance(m, nn.Linear)]
        x = x.contiguous()
        for i, lin in enumerate(linears):
            x = ext.bias_act_cuda(torch.mm(x, lin.weight.t()), lin.bias, i < len(linears) - 1)
        return x
