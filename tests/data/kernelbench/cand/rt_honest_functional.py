# kgate red-team candidate (honest): torch.nn.functional, nn.Sequential holding nn.Softmax, and a
# ModelNew whose forward goes through a submodule chain. Right verdict: accepted.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Identity(), nn.Softmax(dim=1))

    def forward(self, x):
        y = self.body(x)
        # the same again through the functional form, averaged: equal to either
        return 0.5 * (y + F.softmax(x, dim=-1))
