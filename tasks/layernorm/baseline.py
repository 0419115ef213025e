# The layernorm task's torch baseline (`baseline: torch:` in task.yaml): layer normalisation over
# (F, D1, D2) with the task's weight and bias as inputs (KernelBench's level-1 LayerNorm at these
# dims), timed in eager mode and under torch.compile by kgate's trusted torch runner.
import torch
import torch.nn as nn
import torch.nn.functional as F_


class Model(nn.Module):
    def forward(self, x, weight, bias):
        return F_.layer_norm(x, tuple(weight.shape), weight, bias, eps=1e-5)


B = 16
F = 64
D1 = 256
D2 = 256


def get_inputs():
    return [torch.randn(B, F, D1, D2), torch.randn(F, D1, D2), torch.randn(F, D1, D2)]


def get_init_inputs():
    return []
