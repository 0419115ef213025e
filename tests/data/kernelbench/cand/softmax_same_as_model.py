# kgate test candidate (KernelBench ModelNew): the Model's own forward, unchanged. Honest (it
# computes the task), if no faster: it must be accepted.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)
