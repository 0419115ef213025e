# kgate test problem (KernelBench format, written for kgate): a loss, as level 1's are. Its output is
# a scalar, a 0-dim tensor.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


batch_size = 128
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
