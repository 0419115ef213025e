# kgate test candidate (KernelBench ModelNew): tests/data/kernelbench/batchnorm.py's own Model, renamed ModelNew (an
# honest answer: the reference's computation, in plain PyTorch).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
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
