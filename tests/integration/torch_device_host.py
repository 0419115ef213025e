"""The device half of kgate's torch runner (runner/torch_device.py) on the host, with a stand-in for
the device: its arena a host buffer, its call a plain call. What it checks runs the same on a GPU:
the tensor table read at SETUP, a batched RUN calling the module on every set stride bytes apart
with each set's parameters bound, the layout's own tensors bound again after a batch, each set's
outputs the module's on that set's inputs, an entry a candidate may not ask for refused, and the
warm-up's dims. Run by torch_device_host.sh; exits non-zero with the first difference."""
import importlib.util
import os
import sys


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


here = sys.argv[1]  # the runner's directory
tr = load("kgate_torch_runner", os.path.join(here, "torch_runner.py"))
td = load("kgate_torch_device", os.path.join(here, "torch_device.py"))
td.install(tr)
import torch  # noqa: E402


class HostDevice:
    """torch_device.Device's interface over a host buffer: views into it, calls made in place."""

    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.buf = torch.zeros(nbytes, dtype=torch.uint8)

    def view(self, off, dtype, shape):
        n = 1
        for d in shape:
            n *= d
        size = n * torch.empty((), dtype=dtype).element_size()
        assert 0 <= off and off + size <= self.nbytes, (off, size, self.nbytes)
        return self.buf[off:off + size].view(dtype).view(shape)

    def call(self, fn):
        fn()
        return 7, 0


B, F, D1, D2 = 2, 3, 4, 5
L = F * D1 * D2
STRIDE = 1 << 14
SETS = 3
dev = HostDevice(STRIDE * SETS)
# the task's tensors: x, ln.weight, ln.bias, then y; 256-byte aligned offsets as kgate's flat arena
offs = [0, 256, 512, 1024]
shapes = [(B, F, D1, D2), (F, D1, D2), (F, D1, D2), (B, F, D1, D2)]
# the tensor tables file (runner/wire.h): a header, one table head, its tensors
blob = tr.TABLES.pack(tr.MAGIC, 1) + tr.TABLE.pack(tr.TABLES.size + tr.TABLE.size, 3, 1)
for off, shp in zip(offs, shapes):
    blob += tr.TENSOR.pack(off, 0, len(shp), *(list(shp) + [0] * (8 - len(shp))))
fd = os.memfd_create("tables")
os.write(fd, blob)
r = tr.Runner(candidate=False, tables_fd=fd, dev=dev)
r.device_mod = td
with open(sys.argv[2]) as fh:  # tests/data/kernelbench/layernorm.py
    r.src = fh.read()
note = b"batch_size=%d features=%d dim1=%d dim2=%d" % (B, F, D1, D2)
cmd = tr.CMD.pack(tr.MAGIC, tr.SETUP, 1, STRIDE, 3, 1, 0, 0, 0, 0, note, 0, 0, 0, 0, 0)
f = tr.CMD.unpack(cmd)[:-5]
r.setup(f)
assert r.n_x == 1 and [n for n, _ in r.bound] == ["ln.weight", "ln.bias"], (r.n_x, r.bound)
assert r.table[3] == (1024, 0, (B, F, D1, D2)), r.table

g = torch.Generator().manual_seed(1)
for k in range(SETS):
    for i, shp in enumerate(shapes[:3]):
        v = dev.view(offs[i] + k * STRIDE, torch.float32, shp)
        v.copy_(torch.randn(shp, generator=g) * (k + 1))
ns, tail = r.dev_run(SETS, STRIDE, 0)
assert ns == 7, ns
for k in range(SETS):
    x, w, b = (dev.view(offs[i] + k * STRIDE, torch.float32, shapes[i]) for i in range(3))
    want = torch.nn.functional.layer_norm(x, (F, D1, D2), w, b, 1e-5)
    got = dev.view(offs[3] + k * STRIDE, torch.float32, shapes[3])
    assert torch.allclose(got, want, atol=1e-5), "set %d: max err %g" % (k, (got - want).abs().max())
# after the batch the parameters are the layout's own tensors again (set 0's)
assert r.model.ln.weight.data.data_ptr() == r.views[1].data_ptr(), "weight not bound back to set 0"
# a lone call on set 0 still right
dev.view(offs[3], torch.float32, shapes[3]).zero_()
r.dev_run(1, 0, 0)
x, w, b = (dev.view(offs[i], torch.float32, shapes[i]) for i in range(3))
assert torch.allclose(dev.view(offs[3], torch.float32, shapes[3]),
                      torch.nn.functional.layer_norm(x, (F, D1, D2), w, b, 1e-5), atol=1e-5)
# the warm-up's dims, as kgate writes them (plan shape strings, ';' between shapes)
assert td._dims("batch_size=4 dim=64") == {"batch_size": 4, "dim": 64}
assert td._arg(["x", "--warmup", "a=1;b=2"], "--warmup") == "a=1;b=2"
assert td._arg(["x", "--warmup"], "--warmup") is None
print("torch_device on the host: %d sets, parameters bound per set and back, outputs right" % SETS)
