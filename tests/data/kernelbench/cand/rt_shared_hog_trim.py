# kgate red-team candidate (hostile, resources): rt_shared_hog.py's 1.5 GiB in shared anonymous
# mappings, each then advised MADV_DONTNEED: the pages leave the process's page tables (its resident
# size drops to nothing) but stay in the shared object, held as long as the mapping is. A bound on
# resident size alone would not see them. Right verdict: rejected (sandbox.memory): a shared mmap
# reaches the supervisor before it runs and is charged at its length while the object lives.
import mmap
import sys

import torch
import torch.nn as nn

CHUNK = 256 << 20
if "torch_build.py" not in sys.argv[0]:  # not in the builder: in the run sandbox, at LOAD
    _hold = []
    for _ in range(6):
        m = mmap.mmap(-1, CHUNK)
        m[::4096] = b"\1" * (CHUNK // 4096)
        m.madvise(mmap.MADV_DONTNEED)
        _hold.append(m)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
