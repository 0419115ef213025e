# kgate test problem (KernelBench format, written for kgate): a forward that reads a value of its
# input (.item()), which no torch runs on the meta device: its task's shapes come from small real
# runs instead. Its sizes as level 2's 3D files write them (depth, height, width = ...).
import torch
import torch.nn as nn


class Model(nn.Module):
    """x divided by its largest magnitude, taken as a Python number."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (x.abs().max().item() + 1.0)


batch_size = 16
channels = 8
depth, height, width = 16, 32, 32


def get_inputs():
    return [torch.rand(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
