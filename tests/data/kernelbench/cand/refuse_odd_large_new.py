# kgate test candidate (KernelBench ModelNew for refuse_odd_large.py, honest): the same scaling,
# with no refusal. Right verdict: accepted, with the odd-width variant dropped (the Model refuses it).
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 0.5 + 1.0
