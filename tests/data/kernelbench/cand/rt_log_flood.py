# kgate red-team candidate (hostile): its top level, in the builder, writes 512 MiB to stdout (the
# compile log) before failing. Right verdict: rejected (compile.error), kgate's memory and the
# report bounded (the log cut, said so).
import os
import sys

import torch
import torch.nn as nn

if "torch_build.py" in sys.argv[0]:
    line = (b"A" * 1023) + b"\n"
    block = line * 1024
    for _ in range(512):
        os.write(1, block)
    raise SystemExit(1)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
