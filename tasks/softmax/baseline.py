# The softmax task's torch baseline (`baseline: torch:` in task.yaml): what a candidate's speed is
# quoted against beside kgate's own reference, timed in eager mode and under torch.compile by
# kgate's trusted torch runner (KernelBench's level-1 softmax, at this task's dims).
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


R = 4096
C = 65536


def get_inputs():
    return [torch.randn(R, C)]


def get_init_inputs():
    return []
