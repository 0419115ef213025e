# kgate hostile candidate (KernelBench's zero_out_kernel, in PyTorch): zeroes its input in place and
# returns the softmax of zeros, which a harness that reads the input after the call would match.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x.zero_()
        return torch.softmax(x, dim=1)
