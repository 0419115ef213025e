"""kgate's torch runner on a GPU: what torch_runner.py does with --device-arena BYTES.

The device arena is kgate-device's allocation (CUDA VMM, exported as a POSIX fd, fd 4), imported into
torch's own primary context with the driver API through ctypes, as runner/cuda.c does in C
(cuMemImportFromShareableHandle, cuMemAddressReserve, cuMemMap, cuMemSetAccess), and every tensor of
the task is a zero-copy torch view of it (__cuda_array_interface__): this process holds no host copy
of anything kgate judges by. A call runs on a stream made here before HELLO, between two events (the
runner's claim), and the whole device is synchronised before the RUN reply; kgate-device stages the
inputs, flushes the L2, snapshots the outputs and keeps the clock (the span from the inputs on the
device to its snapshot). A batched RUN calls the module back to back on every staged set.

The sandbox starts this process with its baseline deny filter only (seccomp_deferred): the run
profile's filter allows ioctl on the driver's device nodes by fd, and those are open only once CUDA
is up here. apply_filter() loads it through libkgate-filter.so (runner/pyfilter.c) before HELLO, before
anything of a candidate's is loaded; the parent checks from outside that it is in place.

A warm-up (--warmup): a Triton ModelNew's kernels are compiled (and autotuned) in a process of their
own before the run, at every planned shape, built from the run's state file as the run's process
builds it, on tensors of its own (the state file's dtypes and shapes, drawn by torch: nothing of the
run's secret; the problem module never enters a candidate's process), into a cache directory kgate
made for this run; the run's process
then finds every kernel there and compiles nothing (it may start no process)."""
import ctypes
import os
import sys
import time

CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
ENTRY_FORWARD, ENTRY_TERMS, ENTRY_COMPILED = 0, 1, 2  # runner/wire.h's KG_ENTRY_*


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class _Blob:
    """Raw device bytes as the CUDA array interface describes them (no stream: no synchronisation)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}


class DeviceError(Exception):
    pass


class Device:
    """torch's CUDA context, kgate-device's arena mapped into it, the stream and events of a call."""

    def __init__(self, fd, nbytes):
        import torch

        self.torch = torch
        if not torch.cuda.is_available():
            raise DeviceError("torch %s sees no CUDA device" % torch.__version__)
        torch.cuda.set_device(0)
        torch.cuda.init()
        # the primary context exists once torch has run something on the device
        torch.zeros(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.nbytes = int(nbytes)
        self.base = self._import(fd, self.nbytes)
        # the call's stream: made here, blocking (ordered with the legacy default stream), so that a
        # KernelBench kernel launched with <<<grid, block>>> and no stream, as KernelBench's own
        # harness runs them, is ordered with the output's copy that follows it on this one
        handle = ctypes.c_void_p()
        self._check(self.cu.cuStreamCreate(ctypes.byref(handle), ctypes.c_uint(0)), "cuStreamCreate")
        self.stream = torch.cuda.ExternalStream(handle.value)
        self.ev0 = torch.cuda.Event(enable_timing=True)
        self.ev1 = torch.cuda.Event(enable_timing=True)

    def _check(self, rc, what):
        if rc:
            s = ctypes.c_char_p()
            self.cu.cuGetErrorString(rc, ctypes.byref(s))
            raise DeviceError("%s: CUDA error %d (%s)" % (what, rc, (s.value or b"unknown").decode()))

    def _import(self, fd, nbytes):
        cu, c = self.cu, ctypes
        dev = c.c_int()
        self._check(cu.cuCtxGetDevice(c.byref(dev)), "cuCtxGetDevice")
        h = c.c_ulonglong()
        self._check(cu.cuMemImportFromShareableHandle(c.byref(h), c.c_void_p(fd),
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                    "cuMemImportFromShareableHandle (kgate-device's arena)")
        ptr = c.c_ulonglong()
        self._check(cu.cuMemAddressReserve(c.byref(ptr), c.c_size_t(nbytes), c.c_size_t(0), c.c_ulonglong(0),
                                           c.c_ulonglong(0)), "cuMemAddressReserve")
        self._check(cu.cuMemMap(ptr, c.c_size_t(nbytes), c.c_size_t(0), h, c.c_ulonglong(0)),
                    "cuMemMap (kgate-device's arena)")
        desc = _AccessDesc(_Location(CU_MEM_LOCATION_TYPE_DEVICE, dev.value), CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        self._check(cu.cuMemSetAccess(ptr, c.c_size_t(nbytes), c.byref(desc), c.c_size_t(1)), "cuMemSetAccess")
        cu.cuMemRelease(h)  # the mapping holds it
        os.close(fd)  # one import, not a second later
        return ptr.value

    def prime(self):
        """What torch sets up on first use, done before the filter: the stream's cuBLAS handle and
        workspace, the allocator's first blocks, the events."""
        torch = self.torch
        with torch.cuda.stream(self.stream):
            a = torch.ones(64, 64, device="cuda")
            (a @ a).softmax(-1).sum().item()
            self.ev0.record(self.stream)
            self.ev1.record(self.stream)
        torch.cuda.synchronize()
        self.ev0.elapsed_time(self.ev1)

    def view(self, off, dtype, shape):
        """The arena's bytes at off as a tensor of dtype and shape, no copy."""
        torch = self.torch
        n = 1
        for d in shape:
            n *= d
        nbytes = n * torch.empty((), dtype=dtype).element_size()
        if off < 0 or off + nbytes > self.nbytes:
            raise DeviceError("tensor at %d (%d bytes) lies outside the arena" % (off, nbytes))
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype, device="cuda")
        raw = torch.as_tensor(_Blob(self.base + off, nbytes), device="cuda")
        return raw.view(dtype).view(shape)

    def call(self, fn):
        """fn on the call's stream between the runner's events, then the whole device synchronised:
        (the events' ns, the ns the device stayed busy after the stream). Both are claims."""
        torch = self.torch
        with torch.cuda.stream(self.stream):
            self.ev0.record(self.stream)
            fn()
            self.ev1.record(self.stream)
        self.ev1.synchronize()
        ns = int(self.ev0.elapsed_time(self.ev1) * 1e6)
        t0 = time.perf_counter_ns()
        torch.cuda.synchronize()
        return ns, time.perf_counter_ns() - t0


def libcuda_dir():
    """The directory of the libcuda this process loaded (its maps), for Triton (TRITON_LIBCUDA_PATH):
    otherwise Triton asks `ldconfig -p` for it, a process the run filter does not let start."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if line.count("/") else ""
                if os.path.basename(path).startswith("libcuda.so"):
                    return os.path.dirname(path)
    except OSError:
        pass
    return None


def prime_triton():
    """What Triton computes once a process and would start a process for, computed here before the
    run filter (nothing of the candidate's has run yet): ptxas's version, in every compile key
    (backend.hash()), libcuda's directory, and its driver's helper module (from the run's cache,
    compiled by the warm-up). Then a kernel's first launch under the filter finds everything in
    memory or in the cache and starts nothing. Best effort: what this Triton lacks is skipped, and a
    launch that still needs a process fails the candidate's run, named."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return
    d = libcuda_dir()
    if d:
        os.environ.setdefault("TRITON_LIBCUDA_PATH", d)
    try:
        from triton.runtime import driver

        target = driver.active.get_current_target()
        try:
            from triton.compiler.compiler import make_backend
        except ImportError:
            from triton.compiler import make_backend
        make_backend(target).hash()
    except Exception as ex:  # noqa: BLE001 (said, not fatal: the launch names what is missing)
        print("kgate torch runner: priming Triton: %s: %s" % (type(ex).__name__, ex))
        sys.stdout.flush()


def apply_filter(lib):
    """The run profile's filter, applied to every thread once CUDA is up (libkgate-filter.so)."""
    f = ctypes.CDLL(lib)
    err = ctypes.create_string_buffer(400)
    rc = f.kg_pyfilter_apply(err, ctypes.c_size_t(len(err)))
    if rc:
        raise DeviceError("the run filter: %s" % err.value.decode("utf-8", "replace"))


def set_views(runner, sets, stride):
    """Each set's tensors, stride bytes apart (made once a layout and batch, then kept)."""
    key = (id(runner.views), sets, stride)
    if getattr(runner, "_sets_key", None) != key:
        runner._sets = [runner.views if k == 0 else
                        [runner.dev.view(off + k * stride, runner.tdt[dt], shape) for off, dt, shape in runner.table]
                        for k in range(sets)]
        runner._sets_key = key
    return runner._sets


def compiled(runner):
    """A baseline runner's torch.compile of its module (the default mode, as KernelBench's), made
    once per module; its first calls compile (the warm-up, untimed)."""
    if getattr(runner, "_compiled_of", None) is not runner.model:
        runner._compiled = runner.torch.compile(runner.model)
        runner._compiled_of = runner.model
    return runner._compiled


_shared = None  # torch_runner.py's module (flat_outputs, Unmappable): install()


def install(shared):
    global _shared
    _shared = shared


def forward_into(fn, xs, outs):
    """The runner's run() on one set: the forward, its outputs checked as the task says and copied."""
    import torch

    res = _shared.flat_outputs(fn(*xs))
    if len(res) != len(outs):
        raise _shared.Unmappable("forward returned %d outputs, the task has %d" % (len(res), len(outs)))
    for o, r in zip(outs, res):
        if tuple(r.shape) != tuple(o.shape):
            raise _shared.Unmappable("output shape %s, the task says %s" % (tuple(r.shape), tuple(o.shape)))
        if (r.dtype == torch.bool) != (o.dtype == torch.bool):
            raise _shared.Unmappable("output dtype %s, the task says %s" % (r.dtype, o.dtype))
        o.copy_(r)


def run(runner, sets, stride, entry):
    """One RUN on the device: the module called on each of `sets` sets back to back (1: the layout
    as set up), its outputs copied into the arena's (torch allocates its own), on the call's stream;
    the runner's events' ns (a claim) and the tail after the stream."""
    torch = runner.torch
    fn = compiled(runner) if entry == ENTRY_COMPILED else runner.model
    batched = sets > 1
    views = set_views(runner, sets, stride) if batched else [runner.views]

    def body():
        with torch.no_grad():
            for vs in views:
                # each call's state as the host runner's (torch_runner.Bound): a batch's set its own
                # parameters and statistics, every call the kept buffers' values from the state file
                if batched:
                    runner.bound.restore_set(runner.model, vs)
                else:
                    runner.bound.restore()
                forward_into(fn, _shared.with_consts(vs[:runner.n_x], runner.consts), vs[runner.n_in:])

    ns, tail = runner.dev.call(body)
    if batched:  # the layout's own tensors again, for a lone call after the batch
        runner.bound.restore_set(runner.model, runner.views)
    return ns, tail


def _arg(argv, name):
    i = argv.index(name) if name in argv else -1
    return argv[i + 1] if 0 <= i < len(argv) - 1 else None


def _dims(text):
    return dict((kv.split("=", 1)[0], int(kv.split("=", 1)[1])) for kv in text.split() if "=" in kv)


def warmup_inputs(torch, st, raw, shared, device="cuda"):
    """The forward's arguments for a warm-up at one shape: tensors of the state file's dtypes and
    shapes, drawn here (normal floats; zeros for integers and bools, an index valid in any table),
    and get_inputs()'s numbers at their places."""
    xs = []
    for x in st.get("xs", []):
        dt, shape = getattr(torch, x["dtype"]), tuple(x["shape"])
        xs.append(torch.randn(shape, dtype=dt, device=device) if dt.is_floating_point else
                  torch.zeros(shape, dtype=dt, device=device))
    return shared.with_consts(xs, [(at, shared.decode(v, raw)) for at, v in st.get("consts", [])])


def warmup(argv, shared):
    """--warmup "DIMS;DIMS..." --candidate: the candidate's forward once at every planned shape the
    Model runs at, built from the state file as its run's process builds it (the constructor's
    arguments as data, the mode), on tensors of this process's own (the state file's dtypes and
    shapes, drawn on the device: nothing of the run's secret; the problem module is never here), so
    that Triton compiles and autotunes every kernel into the run's cache now. One line a shape; exit
    1 with the first failure's words."""
    import torch

    try:
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")
        d = libcuda_dir()
        if d:  # as the run's process will have it (prime_triton)
            os.environ.setdefault("TRITON_LIBCUDA_PATH", d)
        with open("/kgate/cand/kernel.py") as fh:
            src = fh.read()
        state, raw = shared.read_state(shared.STATE)
        ce = shared.cpp_extension_module()
        ce.load_inline, ce.load = shared.prebuilt_loader("/kgate/cand/kernel.so")
        cls = shared.exec_module(src).get("ModelNew")
        if not isinstance(cls, type):
            raise shared.Unmappable("the candidate defines no class ModelNew")
        for text in (_arg(argv, "--warmup") or "").split(";"):
            dims = _dims(text)
            st = state["shapes"].get(shared.dims_key(dims))
            if st is None or not st.get("ok"):  # a shape the Model refuses: dropped from the run
                print("kgate-warmup: %s: skipped (the Model refuses it)" % (text.strip() or "(no dims)"))
                continue
            torch.manual_seed(0)
            with torch.device("cuda"):
                model = cls(*shared.decode(st["init"], raw)).cuda()
            if state["mode"] != "problem":  # as the run's process sets it (torch_runner.Runner.setup)
                model.train(state["mode"] == "train")
            xs = warmup_inputs(torch, st, raw, shared)
            t0 = time.perf_counter()
            with torch.no_grad():
                model(*xs)
            torch.cuda.synchronize()
            print("kgate-warmup: %s: %.1f s" % (text.strip() or "(no dims)", time.perf_counter() - t0))
            sys.stdout.flush()
            del xs, model
            torch.cuda.empty_cache()
    except Exception as ex:  # noqa: BLE001 (the candidate's failure, named by kgate)
        print("kgate-warmup: failed: %s: %s" % (type(ex).__name__, ex))
        return 1
    return 0


def on_device(shared):
    """The runner's SETUP with torch's default device the GPU: the module's constructor makes its
    parameters there (an MLP's gigabytes initialised in milliseconds, not seconds on the host), where
    the arena's tensors then replace them; forward runs as written, outside this. SETUP returns
    nothing (its reply is the protocol loop's)."""
    import torch

    setup = shared.Runner.setup

    def setup_on_device(self, f):
        with torch.device("cuda"):
            setup(self, f)
        # the constructor's own parameters, replaced by the arena's, back to the device (an MLP's
        # gigabytes would otherwise stay in torch's cache beside the arena's)
        torch.cuda.empty_cache()

    shared.Runner.setup = setup_on_device


def main(argv, shared):
    """torch_runner.py's entry on a GPU: the device and its arena up, the filter applied (where
    --filter-lib names kgate's library: a trusted baseline runs without it, for torch.compile's
    compiler processes), then the runner's protocol as on the host."""
    install(shared)
    on_device(shared)
    if "--warmup" in argv:
        return warmup(argv, shared)
    try:
        dev = Device(shared.ARENA_FD, int(_arg(argv, "--device-arena") or 0))
        dev.prime()
        if os.environ.get("TRITON_CACHE_DIR"):  # a JIT candidate's run: its kernels in the cache
            prime_triton()
        lib = _arg(argv, "--filter-lib")
        if lib:
            apply_filter(lib)
        tables = _arg(argv, "--tables")
        r = shared.Runner(candidate="--candidate" in argv, tables_fd=int(tables) if tables else None, dev=dev)
        r.device_mod = sys.modules[__name__]
    except Exception as ex:  # noqa: BLE001 (the runner could not start: HELLO says why)
        try:
            os.write(shared.CTL_FD, shared.REPLY.pack(shared.MAGIC, shared.HELLO, 0, 4, 0, 0, 0, 0, 0, 0,
                                                      ("torch device runner: %s" % ex).encode()[:399]))
        except OSError:
            pass
        return 1
    r.torch.set_num_threads(1)
    return r.serve()
