# kgate test candidate (KernelBench ModelNew for batchnorm.py, honest): batch normalisation written
# out with each batch's own mean and (biased) variance, as the Model computes in training mode,
# the mode the problem leaves it in. Its running statistics are the Model's names (bound), and
# unused. Right verdict: accepted (and, under module_mode: eval, check.mismatch).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features)

    def forward(self, x):
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        var = ((x - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True)
        w = self.bn.weight.view(1, -1, 1, 1)
        b = self.bn.bias.view(1, -1, 1, 1)
        return (x - mean) * torch.rsqrt(var + self.bn.eps) * w + b
