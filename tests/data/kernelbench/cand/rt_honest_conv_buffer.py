# kgate red-team candidate (honest): the conv task's ModelNew with the Model's parameters under the
# Model's names, plus a persistent buffer of its own (a constant made without a random draw), which
# shifts every entry after it in state_dict order. Right verdict: accepted (bound by name).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.register_buffer("zero", torch.zeros(out_channels, 1, 1))

    def forward(self, x):
        return F.relu(self.conv(x)) + (self.bias + self.zero)
