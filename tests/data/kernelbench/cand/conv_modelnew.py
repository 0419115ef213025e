# kgate test candidate (KernelBench ModelNew, plain PyTorch): conv2d, ReLU and the added bias fused
# into one in-place chain; its parameters are the Model's, in the Model's state_dict order.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return F.conv2d(x, self.conv.weight, self.conv.bias).relu_().add_(self.bias)
