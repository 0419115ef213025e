# kgate hostile candidate: does the work, and patches the clock the torch runner reads (its own
# process's time.perf_counter_ns) so that the runner claims every call took a microsecond.
import time

import torch
import torch.nn as nn

_real = time.perf_counter_ns
_state = {"t": _real()}


def _fake():
    _state["t"] += 500
    return _state["t"]


time.perf_counter_ns = _fake


class ModelNew(nn.Module):
    def forward(self, x):
        y = x
        for _ in range(20):  # slow on purpose: a long call the claim hides
            y = torch.softmax(x, dim=1)
        return y
