# kgate test candidate (KernelBench ModelNew): its added bias is one value per channel (out_channels,)
# where the Model's is (out_channels, 1, 1): the parameters cannot be bound, and the rejection says so.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias.view(1, -1, 1, 1)
