# kgate red-team candidate (hostile): its "kernel" refuses every size and falls back to the
# problem's own Model, looked for everywhere a ModelNew could find it: live objects (gc), loaded
# modules (sys.modules), an import of the problem's module, and the problem file in the run
# sandbox. kgate 0.3 built the problem's Model in this process (and showed the file at
# /kgate/lib/problem.py), so the fallback ran the reference itself and was accepted. Where none is
# found it returns its input unchanged. Right verdict: rejected (check.mismatch: the Model is not
# in the candidate's process).
import gc
import glob
import importlib
import sys

import torch.nn as nn


def find_model():
    for obj in gc.get_objects():
        if isinstance(obj, type) and obj.__name__ == "Model" and issubclass(obj, nn.Module):
            return obj
    for mod in list(sys.modules.values()):
        cls = getattr(mod, "Model", None)
        if isinstance(cls, type) and issubclass(cls, nn.Module):
            return cls
    for name in ("kgate_problem", "problem"):
        try:
            cls = getattr(importlib.import_module(name), "Model", None)
            if isinstance(cls, type):
                return cls
        except Exception:  # noqa: BLE001
            pass
    for path in ["/kgate/lib/problem.py"] + glob.glob("/kgate/**/*.py", recursive=True) + glob.glob("/tmp/**/*.py", recursive=True):
        try:
            ns = {"__name__": "found"}
            exec(open(path).read(), ns)
            if isinstance(ns.get("Model"), type):
                return ns["Model"]
        except Exception:  # noqa: BLE001
            pass
    return None


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.args = args
        self.ref = None

    def forward(self, x):
        if self.ref is None:
            cls = find_model()
            self.ref = cls(*self.args) if cls is not None else False
        if self.ref is False:
            return x.clone()  # nothing found: the fallback fails
        return self.ref(x)
