# The matmul task's torch baseline (`baseline: torch:` in task.yaml): torch.matmul in fp32 (TF32
# off, torch's default), timed in eager mode and under torch.compile by kgate's trusted torch runner.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


N = 4096


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
