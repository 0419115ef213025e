# kgate test problem (KernelBench format, written for kgate): a depthwise conv2d whose groups are
# given by another name (groups = in_channels), as level 1's depthwise files write them.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d with one group per input channel, no bias."""

    def __init__(self, in_channels: int, kernel_size: int, groups: int):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


batch_size = 16
in_channels = 64
kernel_size = 3
height = width = 512
groups = in_channels


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, kernel_size, groups]
