"""The device half of kgate's torch runner (runner/torch_device.py) on the host, with a stand-in for
the device: its arena a host buffer, its call a plain call. What it checks runs the same on a GPU:
the tensor table read at SETUP, the run's state file (torch_derive.state) bound, a batched RUN
calling the module on every set stride bytes apart with each set's parameters bound and each set's
running statistics copied (BatchNorm in eval mode), the layout's own tensors bound again after a
batch, each set's outputs the module's on that set's inputs, and the warm-up's dims and inputs (the
state file's dtypes, shapes and constants, never the problem module). Run by torch_device_host.sh
(argv: the runner's directory, then tests/data/kernelbench); exits non-zero with the first
difference."""
import importlib.util
import os
import sys


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


here = sys.argv[1]  # the runner's directory
data = sys.argv[2]  # tests/data/kernelbench
tr = load("kgate_torch_runner", os.path.join(here, "torch_runner.py"))
td = load("kgate_torch_device", os.path.join(here, "torch_device.py"))
tdv = load("kgate_torch_derive", os.path.join(here, "torch_derive.py"))
td.install(tr)
import torch  # noqa: E402


def state_of(module, spec):
    """The state file a run's state job builds for module and spec, read as the runner reads it."""
    with open(os.path.join(data, module)) as fh:
        blob = tdv.state(tr, fh.read(), "problem", spec)
    fd = os.memfd_create("state")
    os.write(fd, blob)
    return tr.read_state("/proc/self/fd/%d" % fd)


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
with open(os.path.join(data, "layernorm.py")) as fh:
    r.src = fh.read()
note = b"batch_size=%d features=%d dim1=%d dim2=%d" % (B, F, D1, D2)
r.state, r.raw = state_of("layernorm.py", "mode problem\ninput x activation\ninput ln_weight weight\n"
                          "input ln_bias bias\nshape %s\n" % note.decode())
cmd = tr.CMD.pack(tr.MAGIC, tr.SETUP, 1, STRIDE, 3, 1, 0, 0, 0, 0, note, 0, 0, 0, 0, 0)
f = tr.CMD.unpack(cmd)[:-5]
r.setup(f)
assert r.n_x == 1 and [(n, at) for n, _, at in r.bound.entries] == [("ln.weight", 1), ("ln.bias", 2)], \
    (r.n_x, r.bound.entries)
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
# BatchNorm in eval mode (module_mode: eval): each set's running statistics copied into the
# Model's own before its call, num_batches_tracked kept at the state file's value
C = 3
bshapes = [(B, C, D1, D2), (C,), (C,), (C,), (C,), (B, C, D1, D2)]
boffs = [0, 2048, 2304, 2560, 2816, 4096]
blob = tr.TABLES.pack(tr.MAGIC, 1) + tr.TABLE.pack(tr.TABLES.size + tr.TABLE.size, 5, 1)
for off, shp in zip(boffs, bshapes):
    blob += tr.TENSOR.pack(off, 0, len(shp), *(list(shp) + [0] * (8 - len(shp))))
fd = os.memfd_create("tables")
os.write(fd, blob)
bn = tr.Runner(candidate=False, tables_fd=fd, dev=dev)
bn.device_mod = td
with open(os.path.join(data, "batchnorm.py")) as fh:
    bn.src = fh.read()
note = b"batch_size=%d features=%d dim1=%d dim2=%d" % (B, C, D1, D2)
bn.state, bn.raw = state_of("batchnorm.py", "mode eval\ninput x activation\ninput bn_weight weight\n"
                            "input bn_bias bias\ninput bn_running_mean statistic\n"
                            "input bn_running_var variance\nshape %s\n" % note.decode())
cmd = tr.CMD.pack(tr.MAGIC, tr.SETUP, 1, STRIDE, 5, 1, 0, 0, 0, 0, note, 0, 0, 0, 0, 0)
bn.setup(tr.CMD.unpack(cmd)[:-5])
assert [(n, at) for n, _, at in bn.bound.entries] == [
    ("bn.weight", 1), ("bn.bias", 2), ("bn.running_mean", 3), ("bn.running_var", 4),
    ("bn.num_batches_tracked", None)], bn.bound.entries
for k in range(SETS):
    for i, shp in enumerate(bshapes[:5]):
        v = dev.view(boffs[i] + k * STRIDE, torch.float32, shp)
        v.copy_(torch.rand(shp, generator=g) * (k + 1) + (0.5 if i == 4 else 0))
bn.dev_run(SETS, STRIDE, 0)
for k in range(SETS):
    x, w, b, m, v = (dev.view(boffs[i] + k * STRIDE, torch.float32, bshapes[i]) for i in range(5))
    want = torch.nn.functional.batch_norm(x, m, v, w, b, False, 0.1, 1e-5)
    got = dev.view(boffs[5] + k * STRIDE, torch.float32, bshapes[5])
    assert torch.allclose(got, want, atol=1e-5), "batchnorm set %d: max err %g" % (k, (got - want).abs().max())
assert int(bn.model.bn.num_batches_tracked) == 0, "the kept counter is the constructor's"
assert bn.model.bn.running_mean.data_ptr() != bn.views[3].data_ptr(), "a statistic is a copy, not the arena's"

# the warm-up's inputs: the state file's dtypes and shapes, drawn, and get_inputs()'s numbers
state, raw = state_of("scale_by_number.py", "mode problem\ninput A activation\nshape M=3 N=4\n")
st = state["shapes"][tr.dims_key({"M": 3, "N": 4})]
xs = td.warmup_inputs(torch, st, raw, tr, device="cpu")
assert len(xs) == 2 and xs[0].shape == (3, 4) and xs[0].dtype == torch.float32 and xs[1] == 2.5, xs
state, raw = state_of("masked_cumsum.py", "mode problem\ninput x activation\ninput mask activation\n"
                      "shape batch_size=2 length=8\n")
xs = td.warmup_inputs(torch, state["shapes"][tr.dims_key({"batch_size": 2, "length": 8})], raw, tr, device="cpu")
assert [(tuple(x.shape), x.dtype) for x in xs] == [((2, 8), torch.float32), ((2, 8), torch.bool)], xs
# the warm-up's dims, as kgate writes them (plan shape strings, ';' between shapes)
assert td._dims("batch_size=4 dim=64") == {"batch_size": 4, "dim": 64}
assert td._arg(["x", "--warmup", "a=1;b=2"], "--warmup") == "a=1;b=2"
assert td._arg(["x", "--warmup"], "--warmup") is None
print("torch_device on the host: %d sets, parameters bound per set and back, statistics copied per set, "
      "outputs right; the warm-up's inputs from the state file" % SETS)
