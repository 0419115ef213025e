# kgate test problem (KernelBench format, written for kgate): level 1's softmax at its size today,
# 4096 x 393216 (6 GiB a tensor): a task importer must not build it.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the feature dimension."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 393216


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
