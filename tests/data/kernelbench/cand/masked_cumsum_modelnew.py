# kgate test candidate (KernelBench ModelNew): tests/data/kernelbench/masked_cumsum.py's own Model, renamed ModelNew (an
# honest answer: the reference's computation, in plain PyTorch).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        y = torch.cumsum(x * mask, dim=self.dim)
        return y, y > 0


batch_size = 128
length = 4000
dim = 1


def get_inputs():
    x = torch.randn(batch_size, length)
    return [x, torch.randint(0, 2, x.shape).bool()]


def get_init_inputs():
    return [dim]
