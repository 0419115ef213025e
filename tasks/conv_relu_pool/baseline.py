# The conv_relu_pool task's torch baseline (`baseline: torch:` in task.yaml): conv2d with bias, ReLU,
# 2x2 max-pool (floor), the task's weight and bias as inputs, timed in eager mode and under
# torch.compile by kgate's trusted torch runner.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, weight, bias):
        return F.max_pool2d(torch.relu(F.conv2d(x, weight, bias)), 2)


N = 1
C = 1
H = 32
W = 32
K = 6
R = 5
S = 5


def get_inputs():
    return [torch.randn(N, C, H, W), torch.randn(K, C, R, S), torch.randn(K)]


def get_init_inputs():
    return []
