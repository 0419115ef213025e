# kgate red-team candidate (honest): two load_inline extensions, each defining its own C++
# function named `forward` (as KernelBench answers with one extension per fused step often do).
# torch's load_inline builds each into a shared object of its own, so the names never meet.
# Right verdict: accepted.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

shift_src = r"""
torch::Tensor forward(torch::Tensor x) {
    return x - std::get<0>(x.max(1, true));
}
"""
norm_src = r"""
torch::Tensor forward(torch::Tensor x) {
    auto e = x.exp();
    return e / e.sum(1, true);
}
"""

shift = load_inline(name="kg_rt_shift", cpp_sources=shift_src, functions=["forward"])
norm = load_inline(name="kg_rt_norm", cpp_sources=norm_src, functions=["forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return norm.forward(shift.forward(x))
