# kgate test candidate (KernelBench ModelNew for layernorm.py): the Model's weight and bias under
# names of its own (w, b), both of the Model's shape. Nothing says which is which: bound by state_dict
# order (kgate 0.3) a ModelNew registering b first got them swapped without a word. Right verdict:
# rejected at SETUP, the message naming both sides' entries (bound by name, then by a shape only
# one entry of each side has).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.shape = tuple(normalized_shape)
        self.w = nn.Parameter(torch.ones(self.shape))
        self.b = nn.Parameter(torch.zeros(self.shape))

    def forward(self, x):
        return F.layer_norm(x, self.shape, self.w, self.b, 1e-5)
