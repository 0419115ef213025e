# kgate hostile candidate (KernelBench's zero_out_kernel, for the CPU through load_inline): the C++
# extension zeroes its input and returns zeros' softmax.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
torch::Tensor zero_softmax(torch::Tensor x) {
    x.zero_();
    return torch::softmax(x, 1);
}
"""

ext = load_inline(name="kg_zero_softmax", cpp_sources=src, functions=["zero_softmax"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.zero_softmax(x)
