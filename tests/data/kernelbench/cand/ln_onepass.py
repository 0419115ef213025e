# kgate test candidate (KernelBench ModelNew for layernorm.py, hostile): LayerNorm with the one-pass
# variance E[x^2] - E[x]^2 in fp32, its sums torch's own (pairwise, accurate): the cancellation is
# the whole error. At the base shape of a module task (tolerance 1e-4) kgate 0.3's large_mean class
# (|mean| 16 to 32) left it at 40-130 % of the bound: caught in some runs only, by a lucky variant.
# Right verdict: check.mismatch in every run.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        dims = tuple(range(1, x.dim()))
        n = 1
        for d in dims:
            n *= x.shape[d]
        mean = x.sum(dim=dims, keepdim=True) / n
        var = (x * x).sum(dim=dims, keepdim=True) / n - mean * mean
        return (x - mean) * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
