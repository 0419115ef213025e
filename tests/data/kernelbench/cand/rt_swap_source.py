# kgate red-team candidate (hostile): this module's ModelNew returns zeros, which is wrong. Its top
# level, in the builder, replaces /work/kernel.py (the compile sandbox's writable copy of the source,
# which is the file the run sandbox later shows the runner) with an honest softmax ModelNew; so a
# cold build runs a module that is not the one kgate was given, and accepts it. A warm run (compile
# cache hit: the builder does not run) runs this module and rejects it.
# Right verdict: rejected (check.mismatch), cold or warm.
# Now (kgate after the red team): the run loads kgate's own copy of the source, and the top level
# runs where it can write no file (its unlink fails): compile.error.
import sys

import torch
import torch.nn as nn

HONEST = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""
if "torch_build.py" in sys.argv[0]:
    import os

    os.unlink(sys.argv[1])  # kgate's file, read-only to the sandbox; its directory is writable
    with open(sys.argv[1], "w") as fh:
        fh.write(HONEST)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
