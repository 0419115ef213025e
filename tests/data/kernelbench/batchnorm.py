# kgate test problem (KernelBench format, written for kgate): BatchNorm2d as level 1 writes it. The
# problem never calls eval(): the Model runs in training mode, normalising by each batch's own
# statistics (its running mean and variance are updated, and used by nothing). Running mean and
# variance are drawn per trial (the variance positive); num_batches_tracked, a 0-dim int64 buffer,
# is kept at its constructor's value.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Batch normalisation over the channels of a 4-D input."""

    def __init__(self, num_features: int):
        super(Model, self).__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


batch_size = 16
features = 64
dim1 = 256
dim2 = 256


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
