# kgate hostile candidate: computes once and serves the cached result whenever the input sits at the
# same address (a harness that reuses its input buffer with new values is fooled).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            self.cache[key] = torch.softmax(x, dim=1).clone()
        return self.cache[key]
