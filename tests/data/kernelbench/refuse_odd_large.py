# kgate test problem (KernelBench format, written for kgate): a row scaling whose Model fails on
# rows of odd width that hold a value above 1e3 (its gather's index runs past the row there). The
# meta device cannot tell (a gather's indices are data), so the derivation and the state job's
# forward at each shape pass, and the failure comes from the reference's own call at run time: a
# shape other than the base one is then dropped with the Model's words (never exit 3); the base
# shape (even width) always runs.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        w = x.shape[-1]
        idx = (x.abs() > 1e3).long() * (w % 2) * w
        return torch.gather(x, 1, idx) * 0.0 + x * 0.5 + 1.0


batch_size = 4
width = 16


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return []
