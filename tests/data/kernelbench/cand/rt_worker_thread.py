# kgate red-team candidate (hostile, work off the clock's thread): a worker thread started at load
# does every softmax (20 times over, slow on purpose) while forward, on the runner's thread, only
# hands it the input and waits; and a hook on the runner's reply claims 1 us per call. The hope:
# the trusted side times the calling thread, or the claim. Right verdict: under the ci policy
# (threads off), rejected (sandbox.thread); under a policy with threads on, accepted with its real
# time (every thread's CPU time is charged to the call), or timing.tampered for the claim.
import queue
import sys
import threading

import torch
import torch.nn as nn

_in, _out = queue.Queue(), queue.Queue()


def _work():
    while True:
        x = _in.get()
        y = x
        for _ in range(20):
            y = torch.softmax(x, dim=1)
        _out.put(y)


if "torch_build.py" not in sys.argv[0]:  # the run sandbox
    threading.Thread(target=_work, daemon=True).start()
    import gc

    for o in gc.get_objects():
        if type(o).__name__ == "Runner":
            real = o.reply
            o.reply = lambda op, seq, status=0, rc=0, elapsed=0, info=0, msg="", _r=real: \
                _r(op, seq, status, rc, min(elapsed, 1000), info, msg)


class ModelNew(nn.Module):
    def forward(self, x):
        _in.put(x)
        return _out.get()
