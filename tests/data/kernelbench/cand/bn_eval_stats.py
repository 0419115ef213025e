# kgate test candidate (KernelBench ModelNew for batchnorm.py, hostile under the problem's mode): it
# normalises with the running statistics, as BatchNorm does in eval mode (one pass over x, no batch
# reduction: cheaper). The problem never calls eval(), so the Model runs in training mode and uses
# each batch's own statistics. Right verdict: check.mismatch (and accepted under module_mode: eval).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features)

    def forward(self, x):
        return F.batch_norm(x, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias,
                            training=False, eps=self.bn.eps)
