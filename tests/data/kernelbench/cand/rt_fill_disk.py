# kgate red-team candidate (hostile, denial of service): its top level, in the builder, writes file
# after file into the compile sandbox's writable /work, which is a directory on the host's disk:
# RLIMIT_FSIZE bounds each file (64 MiB) but nothing bounds their number or sum, and the build may
# run for 600 s. This example stops itself at N files (1 GiB) and reports the host disk's free space
# before and after; an attacker would go on until the host's disk is full. Right verdict: rejected
# (compile.error) with the writes stopped at a bound well below the host's free space.
# Now: the top level runs in a child that can write no file (RLIMIT_FSIZE 0, Landlock): nothing is
# written, compile.error.
import os
import sys

import torch
import torch.nn as nn

N = 16
if "torch_build.py" in sys.argv[0]:
    def free():
        s = os.statvfs("/work")
        return s.f_bavail * s.f_frsize / 2**30

    before = free()
    chunk = b"\0" * (1 << 20)
    wrote = 0
    try:
        for i in range(N):
            with open("/work/fill%03d" % i, "wb") as fh:
                for _ in range(64):
                    fh.write(chunk)
                    wrote += 1
    except OSError as ex:
        print("stopped: %s" % ex)
    print("wrote %d MiB in %d files; host disk free %.2f GiB -> %.2f GiB" % (wrote, N, before, free()))
    raise SystemExit(1)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
