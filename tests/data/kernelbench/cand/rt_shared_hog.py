# kgate red-team candidate (hostile, resources): holds 1.5 GiB in six shared anonymous mappings
# (Python's mmap.mmap(-1, n) is MAP_SHARED|MAP_ANONYMOUS), every page written, from its load on
# (the module's top level in the run sandbox), under tests/data/memory.yaml's 1024 MiB. The torch
# run sandbox sets no RLIMIT_AS, and RLIMIT_DATA counts no shared memory: kgate 0.3 accepted a
# ModelNew holding 5 GiB so under the ci policy's 4096 MiB. Right verdict: rejected
# (sandbox.memory): the supervisor counts the process's memory as a whole, each shared object once.
import mmap
import sys

import torch
import torch.nn as nn

CHUNK = 256 << 20
if "torch_build.py" not in sys.argv[0]:  # not in the builder: in the run sandbox, at LOAD
    _hold = []
    for _ in range(6):
        m = mmap.mmap(-1, CHUNK)
        m[::4096] = b"\1" * (CHUNK // 4096)  # every page written
        _hold.append(m)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
