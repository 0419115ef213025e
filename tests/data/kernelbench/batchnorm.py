# kgate test problem (KernelBench format, written for kgate): one BatchNorm2d, as level 1's is. Its
# state: weight, bias, running mean and variance, and num_batches_tracked, a 0-dim int64 buffer.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)

    def forward(self, x):
        return self.bn(x)


batch_size = 16
features = 32
dim1 = dim2 = 64


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
