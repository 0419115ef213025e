# kgate hostile candidate (KernelBench's result_reuse_kernel, in PyTorch): returns memory of the
# output's shape that it never wrote, hoping the allocator hands back an earlier correct result.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
