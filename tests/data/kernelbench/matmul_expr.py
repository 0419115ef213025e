# kgate test problem (KernelBench format, written for kgate): C = A.T @ B with its sizes written as
# level 1's matmul files write them, as expressions (M = 1024 * 2).
import torch
import torch.nn as nn


class Model(nn.Module):
    """A matmul with A transposed."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


M = 1024 * 2
K = 4096 * 2
N = 2048 * 2


def get_inputs():
    A = torch.rand(K, M)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []
