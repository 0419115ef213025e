# kgate red-team candidate (hostile, secret recovery): reads /proc/1/cmdline in the run sandbox. Its
# pid 1 is the sandbox's init, a clone of kgate that keeps kgate's argv, so a run given
# `--seed HEX` (a reproduction, or a CI job passing a secret seed) shows the master seed to the
# candidate, from which every trial's and every timed call's inputs follow (kgate's derivation is
# public): their answers can be computed at LOAD, untimed. Here it only quotes what it found, in
# its LOAD error. Right verdict: rejected (load.error) without the seed in its words: the candidate
# must not be able to read the master seed.
# Now: kgate wipes --seed's text from its argv before anything is spawned; the candidate reads x's.
import sys

import torch
import torch.nn as nn

if "torch_build.py" not in sys.argv[0]:  # the run sandbox
    with open("/proc/1/cmdline", "rb") as fh:
        args = fh.read().split(b"\0")
    seed = args[args.index(b"--seed") + 1].decode() if b"--seed" in args else None
    raise RuntimeError("master seed seen by the candidate: %s" % seed)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
