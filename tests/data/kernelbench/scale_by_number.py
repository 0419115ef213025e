# kgate test problem (KernelBench format, written for kgate): a matrix times a number that
# get_inputs() gives the forward beside the tensor, as level 1's scalar multiplication does: the
# number is a constant of the task.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s


M = 1024
N = 4096


def get_inputs():
    return [torch.rand(M, N), 2.5]


def get_init_inputs():
    return []
