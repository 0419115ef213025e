# kgate red-team candidate (hostile, resources): holds 6 GiB (six 1 GiB tensors, touched) in its
# process from its load on (the module's top level in the run sandbox), under the ci policy's 4096 MiB memory bound. The torch run
# sandbox sets no RLIMIT_AS (address_space_unbounded) and its seccomp rule only bounds each mmap's
# length, so where no cgroup is writable nothing bounds the sum; an attacker would take the host's
# memory (and the OOM killer's choice) instead. Right verdict: rejected (sandbox.memory).
# Now: the torch sandboxes bound RLIMIT_DATA by the policy's memory; the allocation fails at LOAD
# (load.error).
import sys

import torch
import torch.nn as nn

HOLD_GIB = 6
if "torch_build.py" not in sys.argv[0]:  # not in the builder: in the run sandbox, at LOAD
    _hold = [torch.ones(1 << 28) for _ in range(HOLD_GIB)]


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
