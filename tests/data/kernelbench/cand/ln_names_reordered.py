# kgate test candidate (KernelBench ModelNew for layernorm.py, honest): the Model's parameters under
# the Model's names (ln.weight, ln.bias), registered bias first, so that state_dict order is the
# other way round. Both have the same shape: bound in state_dict order (kgate 0.3) they swapped.
# Right verdict: accepted (bound by name).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.shape = tuple(normalized_shape)
        self.ln = nn.Module()
        self.ln.register_parameter("bias", nn.Parameter(torch.zeros(self.shape)))
        self.ln.register_parameter("weight", nn.Parameter(torch.ones(self.shape)))

    def forward(self, x):
        return F.layer_norm(x, self.shape, self.ln.weight, self.ln.bias, 1e-5)
