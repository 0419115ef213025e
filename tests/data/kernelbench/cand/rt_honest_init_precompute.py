# kgate red-team candidate (honest by KernelBench's rules): prepares its weights once in __init__ (a
# contiguous copy of the conv weight and the two biases folded into one), as KernelBench answers do
# when they fold or pre-transpose weights; KernelBench builds Model and ModelNew from one seed and
# never changes a weight afterwards, so this is correct there. kgate binds the Model's parameters
# to the ModelNew's after construction and draws new values for them each trial, so the prepared
# copies are stale. Verdict under kgate's rules: rejected (check.mismatch); under KernelBench's:
# accepted. A design question, not a bug: see the report.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        with torch.no_grad():
            self._w = self.conv.weight.detach().contiguous()
            self._b = self.conv.bias.detach().clone()
            self._post = self.bias.detach().clone()

    def forward(self, x):
        return F.relu(F.conv2d(x, self._w, self._b)) + self._post
