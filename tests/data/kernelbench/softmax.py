# kgate test problem (KernelBench format, written for kgate): row softmax.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the feature dimension."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
features = 16384


def get_inputs():
    x = torch.randn(batch_size, features)
    return [x]


def get_init_inputs():
    return []
