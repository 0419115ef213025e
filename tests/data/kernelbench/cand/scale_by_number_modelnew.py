# kgate test candidate (KernelBench ModelNew): tests/data/kernelbench/scale_by_number.py's own Model, renamed ModelNew (an
# honest answer: the reference's computation, in plain PyTorch).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s


M = 1024
N = 4096


def get_inputs():
    return [torch.rand(M, N), 2.5]


def get_init_inputs():
    return []
