# kgate red-team candidate (hostile, precision): the softmax rounded to bfloat16 (8 significant bits).
# Right verdict: rejected (check.mismatch), the policy's precision being fp32.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1).bfloat16().float()
