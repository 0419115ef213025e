"""kgate's torch reference runner: runs a KernelBench-format module's Model as the trusted reference,
speaking kgate-run's protocol (runner/wire.h) over the same fds and on the same arena memory (no
copies in, one copy of each result out). With --derive it prints the task manifest derived from the
module instead (inputs from get_inputs, then the Model's state_dict, outputs from one forward)."""
import ast
import math
import mmap
import os
import struct
import sys
import time
import warnings

# kg_wire_cmd / kg_wire_reply, little-endian x86-64 layout (checked against sizeof in the tests)
TENSOR = "Qii8q"
CMD = struct.Struct("<IIQQII" + TENSOR * 16 + "II512sIIQ")
REPLY = struct.Struct("<IIQiiQQQII400s")
MAGIC = 0x6B67775A
HELLO, LOAD, SETUP, UPLOAD, _RETIRED_FLUSH, RUN, DOWNLOAD, SETTLE, NOP, QUIT = range(1, 11)
WS_OK, WS_ERROR, WS_NOSYM = 0, 1, 3
CTL_FD, ARENA_FD, INPUT_FD = 3, 4, 5
MAX_TENSORS = 8  # KG_MAX_TENSORS: inputs, and outputs, each
BEGIN, END, FAIL = "--- kgate task ---", "--- end ---", "kgate-derive: "  # verifier/torchtask.c reads these
PROBLEM = "/kgate/lib/problem.py"  # where the sandbox shows the problem module (session_start.c)


class Unmappable(Exception):
    """The module's task cannot be expressed as a kgate task (exit 2, with the reason)."""


def dtype_tables():
    import torch

    kg = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int32: 3, torch.int64: 4, torch.uint8: 5}
    names = {0: "f32", 1: "f16", 2: "bf16", 3: "i32", 4: "i64", 5: "u8"}
    return kg, {v: k for k, v in kg.items()}, names


def int_assignments(tree):
    """(name, value node) of each top-level `NAME = <int>`, and of each name of `A, B = <int>, <int>`."""
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        tg, v = node.targets[0], node.value
        pairs = [(tg, v)]
        if isinstance(tg, ast.Tuple) and isinstance(v, ast.Tuple) and len(tg.elts) == len(v.elts):
            pairs = list(zip(tg.elts, v.elts))
        for t, c in pairs:
            if isinstance(t, ast.Name) and isinstance(c, ast.Constant) and type(c.value) is int:
                yield t.id, c


def int_constants(src):
    """Top-level integer constants, in order: the dims a user may rewrite."""
    return {n: c.value for n, c in int_assignments(ast.parse(src))}


def rewrite(src, dims):
    """The module with its top-level integer constants set to dims (derived constants follow)."""
    tree = ast.parse(src)
    seen = set()
    for name, c in int_assignments(tree):
        if name in dims:
            c.value = int(dims[name])  # the constant node itself: tuples and plain assignments alike
            seen.add(name)
    missing = set(dims) - seen
    if missing:
        raise Unmappable("--dims names %s, which the module does not assign as a top-level integer" %
                         ", ".join(sorted(missing)))
    return compile(ast.fix_missing_locations(tree), "<problem>", "exec")


def instantiate(src, dims):
    import torch

    ns = {"__name__": "kgate_problem"}
    exec(rewrite(src, dims), ns)
    for need in ("Model", "get_inputs", "get_init_inputs"):
        if need not in ns:
            raise Unmappable("the module defines no %s (a KernelBench problem has class Model, get_inputs "
                             "and get_init_inputs)" % need)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    model.eval()
    return ns, model


def flat_outputs(res):
    import torch

    if isinstance(res, torch.Tensor):
        return [res]
    if isinstance(res, (tuple, list)) and res and all(isinstance(r, torch.Tensor) for r in res):
        return list(res)
    raise Unmappable("forward returns %s; kgate maps a tensor or a tuple of tensors" % type(res).__name__)


def describe(src, dims):
    """(inputs, outputs) at dims: lists of (name, role, torch dtype, shape)."""
    import inspect
    import torch

    ns, model = instantiate(src, dims)
    torch.manual_seed(0)
    xs = ns["get_inputs"]()
    if not isinstance(xs, (list, tuple)) or not all(isinstance(x, torch.Tensor) for x in xs):
        raise Unmappable("get_inputs() must return a list of tensors (non-tensor inputs are not mapped)")
    try:
        params = [p for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        argn = [p.name for p in params]
    except (TypeError, ValueError):
        argn = []
    ins = []
    for i, x in enumerate(xs):
        name = argn[i] if i < len(argn) else "x%d" % i
        ins.append((name, "activation", x.dtype, tuple(x.shape)))
    for k, v in model.state_dict().items():
        role = "bias" if k.endswith("bias") else "weight"
        ins.append((k.replace(".", "_"), role, v.dtype, tuple(v.shape)))
    with torch.no_grad():
        outs = flat_outputs(model(*xs))
    return ins, [("y" if len(outs) == 1 else "y%d" % j, "", o.dtype, tuple(o.shape)) for j, o in enumerate(outs)]


def infer_exprs(src, base, names):
    """Each tensor dim as an expression in the constants: literal, or affine in the constants that
    move it (fitted by moving each by one and checked with all moved at once). A constant that moves
    some dim in another way is frozen (a literal everywhere, and not varied)."""
    b_in, b_out = describe(src, base)
    flat = [s for t in b_in + b_out for s in t[3]]
    moved = {}
    for n in names:
        try:
            i2, o2 = describe(src, dict(base, **{n: base[n] + 1}))
            f2 = [s for t in i2 + o2 for s in t[3]]
        except Exception:  # noqa: BLE001 (a size the module refuses: not a dim we can vary)
            continue
        if len(f2) == len(flat):
            moved[n] = [a - b for a, b in zip(f2, flat)]
    exprs = [str(v) for v in flat]
    frozen = set()
    try:
        step = {n: 2 for n in moved}
        i3, o3 = describe(src, dict(base, **{n: base[n] + 2 for n in moved}))
        f3 = [s for t in i3 + o3 for s in t[3]]
    except Exception:  # noqa: BLE001
        f3 = None
    for k, v in enumerate(flat):
        terms = [(n, moved[n][k]) for n in moved if moved[n][k]]
        if not terms:
            continue
        c0 = v - sum(a * base[n] for n, a in terms)
        ok = f3 is not None and len(f3) == len(flat) and f3[k] == v + sum(a * step[n] for n, a in terms)
        if not ok:
            frozen.update(n for n, _ in terms)
            continue
        e = ""
        for n, a in terms:
            sign = "-" if a < 0 else "+"
            term = n if abs(a) == 1 else "%d*%s" % (abs(a), n)
            e = (("-" if a < 0 else "") + term) if not e else "%s %s %s" % (e, sign, term)
        exprs[k] = e if c0 == 0 else "%s %s %d" % (e, "+" if c0 > 0 else "-", abs(c0))
    # a frozen constant's dims are literals everywhere
    for k, v in enumerate(flat):
        if any(n in exprs[k].replace("*", " ").split() for n in frozen):
            exprs[k] = str(v)
    return b_in, b_out, exprs, [n for n in names if n in moved and n not in frozen]


def derive(path, dims_arg, name):
    import torch

    src = open(path).read()
    consts = int_constants(src)
    dims = dict(consts)
    for kv in filter(None, (dims_arg or "").split(",")):
        k, _, v = kv.partition("=")
        if k.strip() not in consts:
            raise Unmappable("--dims names %s, which the module does not assign as a top-level integer" % k)
        dims[k.strip()] = int(v)
    kg, _, dnames = dtype_tables()
    ins, outs, exprs, var = infer_exprs(src, dims, list(consts))
    if len(ins) > MAX_TENSORS or len(outs) > MAX_TENSORS:
        raise Unmappable("%d inputs (with the Model's parameters and buffers) and %d outputs; kgate maps "
                         "at most %d of each" % (len(ins), len(outs), MAX_TENSORS))
    for t in ins + outs:
        if t[2] not in kg:
            raise Unmappable("tensor '%s' has dtype %s, which kgate does not map" % (t[0], t[2]))
        if len(t[3]) < 1 or len(t[3]) > 8:
            raise Unmappable("tensor '%s' has %d dimensions; kgate maps 1 to 8 (a scalar is not mapped)" %
                             (t[0], len(t[3])))
    names = [t[0] for t in ins + outs]
    if len(set(names)) != len(names):
        raise Unmappable("two tensors are named alike: %s" % ", ".join(names))
    named = [kv.split("=")[0].strip() for kv in (dims_arg or "").split(",") if kv]
    # the task's dims: the constants its shapes are written in, and every one --dims set (the
    # runner rebuilds the module from the dims of each shape)
    declared = [n for n in consts if n in named or any(n in e.replace("*", " ").split() for e in exprs)]
    lines = ["# Derived by kgate from a KernelBench-format module: inputs from get_inputs(), then the",
             "# Model's parameters and buffers in state_dict order; outputs from one forward call.",
             "kgate_task: 1", "name: %s" % name,
             "description: %s (PyTorch Model, the trusted reference)" % name]
    if declared:
        lines.append("dims: [%s]" % ", ".join(declared))
        lines.append("shapes:")
        shape = ", ".join("%s: %d" % (n, dims[n]) for n in declared)
        # the module's shape (after --dims) is the base under every policy's shape set
        lines.append("  nominal: {%s}" % shape)
        lines.append("  ci: {%s}" % shape)
        vary = [n for n in var if n in named]
        if vary:
            # secret random shapes along the dims the user named, around the values given
            lines.append("random_shapes:")
            lines.append("  count: 2")
            lines.append("  ranges: {%s}" % ", ".join(
                "%s: [%d, %d]" % (n, max(1, dims[n] // 2), max(1, dims[n] // 2) + max(32, dims[n]))
                for n in vary))
    k = 0

    def spec(t, out):
        nonlocal k
        shape = exprs[k:k + len(t[3])]
        k += len(t[3])
        s = "  - {name: %s, dtype: %s, shape: [%s]" % (t[0], dnames[kg[t[2]]], ", ".join(shape))
        if not out and t[1] != "activation":
            s += ", role: %s" % t[1]
        if out:
            # what an element may reduce over, at most: every dim but the first (a row of softmax, a
            # sample of LayerNorm, a matmul row); the tolerance's growth term follows it
            red = [d if d.replace("_", "").isalnum() else "(%s)" % d for d in shape[1:]] or ["1"]
            s += ", reduction: %s" % "*".join(red)
        return s + "}"

    lines.append("inputs:")
    lines += [spec(t, False) for t in ins]
    lines.append("outputs:")
    lines += [spec(t, True) for t in outs]
    lines.append("tolerance: {atol: 1.0e-5, rtol: 1.0e-4, rms: 1.0e-4}")
    lines.append("reference:")
    lines.append("  torch: %s" % os.path.basename(path))
    lines.append("# order: %s" % ", ".join(names[:len(ins)]))
    lines.append("# torch %s%s" % (torch.__version__, "" if hasattr(torch, "compile") else " (no torch.compile)"))
    return "\n".join(lines) + "\n"


# ---- the runner ----

def problem_namespace(src, dims):
    """The problem module's top level run at dims (get_init_inputs for a candidate's constructor)."""
    ns = {"__name__": "kgate_problem"}
    exec(rewrite(src, dims), ns)
    if "get_init_inputs" not in ns:
        raise Unmappable("the problem module defines no get_init_inputs")
    return ns


def prebuilt_loader(ext_path):
    """load_inline for a candidate in the run sandbox: the extension its builder (torch_build.py)
    compiled in the compile sandbox, loaded by name from ext_path; nothing is compiled here."""
    import importlib.machinery
    import importlib.util

    loaded = {}

    def load_inline(name, *a, **k):
        if name in loaded:
            return loaded[name]
        with open(ext_path, "rb") as fh:
            elf = fh.read(4) == b"\x7fELF"
        if not isinstance(name, str) or not elf:
            raise ImportError("extension %r was not built before the run" % (name,))
        loader = importlib.machinery.ExtensionFileLoader(name, ext_path)
        spec = importlib.util.spec_from_file_location(name, ext_path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        loaded[name] = mod
        return mod

    def load(*a, **k):
        raise ImportError("torch.utils.cpp_extension.load: a candidate's extensions are load_inline's")

    return load_inline, load


def exec_module(src, name="kgate_candidate", filename="candidate.py"):
    """The module's source run as a module of its own (as torch_build.py does): registered in
    sys.modules with its source in linecache, so that what reads a function's or a class's source
    (torch.jit.script, inspect, typing's forward references) finds it."""
    import linecache
    import types

    mod = types.ModuleType(name)
    mod.__file__ = filename
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    sys.modules[name] = mod
    exec(compile(src, filename, "exec"), mod.__dict__)
    return mod.__dict__


def real_cpp_extension():
    """The real torch.utils.cpp_extension, imported in the run sandbox. Its import starts processes
    (a shell for hipcc and `which` for nvcc unless ROCM_HOME and CUDA_HOME are set, hipify's
    `hipconfig` always), and a process started here ends the run: both are set first, CUDA_HOME as
    kgate gives it to the builder (the toolkit's real path), and while it imports, starting a
    process fails as a missing program does (which each of those callers takes as "none here");
    what was only a stand-in is None again afterwards, as in the builder."""
    import importlib
    import subprocess

    cuda = os.path.realpath(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    fake = {"ROCM_HOME": "/nonexistent", "CUDA_HOME": cuda if os.path.exists(cuda) else "/nonexistent"}
    for k, v in fake.items():
        os.environ.setdefault(k, v)

    def no_process(*a, **k):
        raise FileNotFoundError(2, "no processes are started in the run sandbox", a[0] if a else "")

    keep = subprocess.Popen
    subprocess.Popen = no_process
    try:
        ce = importlib.import_module("torch.utils.cpp_extension")
    finally:
        subprocess.Popen = keep
    for k, v in fake.items():
        if getattr(ce, k, None) == "/nonexistent":
            setattr(ce, k, None)
    return ce


def cpp_extension_module():
    """torch.utils.cpp_extension as the candidate sees it: load_inline and load are the caller's;
    any other name (CUDA_HOME, include_paths, ...) is the real module's, imported on first use
    (real_cpp_extension: it costs a few tenths of a second, which a module that only calls
    load_inline is spared)."""
    import types

    import torch.utils

    name = "torch.utils.cpp_extension"
    ce = types.ModuleType(name)
    real = []

    def lazy(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if not real:
            sys.modules.pop(name, None)
            try:
                real.append(real_cpp_extension())
            finally:
                sys.modules[name] = ce
                torch.utils.cpp_extension = ce
        return getattr(real[0], attr)

    ce.__getattr__ = lazy
    sys.modules[name] = ce
    torch.utils.cpp_extension = ce
    return ce


class Runner:
    def __init__(self, candidate=False):
        import torch

        self.torch = torch
        # hosting a ModelNew candidate (--candidate): the problem module gives the constructor's
        # arguments; the candidate's module gives the class
        self.candidate = candidate
        self.model_cls = None
        self.model_state = None  # (dims, the Model's state_dict names there): candidate_binding's
        self.kg, self.tdt, _ = dtype_tables()
        self.out_size = os.fstat(ARENA_FD).st_size
        try:
            self.in_size = os.fstat(INPUT_FD).st_size
        except OSError:
            self.in_size = 0
        self.outmap = mmap.mmap(ARENA_FD, self.out_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.inmap = mmap.mmap(INPUT_FD, self.in_size, mmap.MAP_SHARED, mmap.PROT_READ) if self.in_size else None
        self.src = None
        self.dims = None
        self.model = None
        self.views = None
        self.n_in = self.n_out = 0

    def reply(self, op, seq, status=WS_OK, rc=0, elapsed=0, info=0, msg=""):
        # plain write(2) and read(2): a SOCK_SEQPACKET keeps records whole, and the socket module's
        # probes (getsockname) are calls the filter does not allow
        os.write(CTL_FD, REPLY.pack(MAGIC, op, seq, status, rc, elapsed, info, 0, 0, 0, msg.encode()[:399]))

    def view(self, off, dt, shape):
        n = math.prod(shape)
        tdt = self.tdt[dt]
        if self.inmap is not None and off < self.in_size:
            buf, o = self.inmap, off
        else:
            buf, o = self.outmap, off - self.in_size
        # zero-copy views of the shared pages (the inputs' pages are read-only, sealed by the parent)
        return self.torch.frombuffer(buf, dtype=tdt, count=n, offset=o).view(shape)

    def setup(self, f):
        self.n_in, self.n_out = f[4], f[5]
        ts = [f[6 + 11 * i:6 + 11 * (i + 1)] for i in range(self.n_in + self.n_out)]
        self.views = [self.view(t[0], t[1], tuple(t[3:3 + t[2]])) for t in ts]
        note = f[-1].split(b"\0", 1)[0].decode()
        dims = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in note.split() if "=" in kv)
        if self.model is None or dims != self.dims:
            if self.candidate:
                init = problem_namespace(self.problem_src, dims)["get_init_inputs"]()
                self.torch.manual_seed(0)
                self.model = self.model_cls(*init)
                self.model.eval()
            else:
                _, self.model = instantiate(self.src, dims)
            self.dims = dims
        sd = self.model.state_dict()
        state = list(sd.keys())
        self.n_x = self.n_in - len(state)
        pairs = list(zip(state, self.views[self.n_x:self.n_in]))
        if self.candidate:
            self.n_x, pairs = self.candidate_binding(sd, dims)
        elif self.n_x < 0:
            raise Unmappable("the task has %d inputs; the Model has %d parameters and buffers" % (self.n_in, len(state)))
        # the Model's parameters and buffers become the arena's tensors, in state_dict order
        for name, v in pairs:
            mod_name, _, attr = name.rpartition(".")
            mod = self.model.get_submodule(mod_name) if mod_name else self.model
            if attr in mod._parameters:
                mod._parameters[attr].data = v
            else:
                mod._buffers[attr] = v

    def candidate_binding(self, sd, dims):
        """(the count of the forward's inputs, [(ModelNew's state_dict name, arena tensor)]): the
        task's tensors after the forward's inputs are the Model's parameters and buffers, in its
        state_dict order. They bind to ModelNew's in state_dict order where ModelNew's state is as
        long and each entry the same shape and dtype; else by name, where ModelNew has every one of
        the Model's entries under its name (its other entries, buffers of its own, stay its own);
        else the task cannot run it, and the first entry that fails is named."""
        views = self.views[:self.n_in]

        def fits(name, v):
            return tuple(sd[name].shape) == tuple(v.shape) and sd[name].dtype == v.dtype

        state = list(sd.keys())
        n_x = self.n_in - len(state)
        first = None
        if n_x < 0:
            first = "the task has %d inputs; the ModelNew has %d parameters and buffers" % (self.n_in, len(state))
        else:
            for i, (name, v) in enumerate(zip(state, views[n_x:])):
                if not fits(name, v):
                    first = ("ModelNew's state_dict entry %d, %s, is %s %s; the Model's is %s %s" %
                             (i, name, sd[name].dtype, tuple(sd[name].shape), v.dtype, tuple(v.shape)))
                    break
            if first is None:
                return n_x, list(zip(state, views[n_x:]))
        # by name: the Model's own entries at these dims (built here, once a shape, then dropped)
        if self.model_state is None or self.model_state[0] != dims:
            _, m = instantiate(self.problem_src, dims)
            self.model_state = (dims, list(m.state_dict().keys()))
            del m
        names = self.model_state[1]
        m_x = self.n_in - len(names)
        bad = [n for n, v in zip(names, views[max(m_x, 0):]) if n not in sd or not fits(n, v)]
        if m_x >= 0 and not bad:
            return m_x, list(zip(names, views[m_x:]))
        why = "ModelNew has no entry %s of that shape and dtype" % bad[0] if bad else "the Model has more"
        raise Unmappable("%s (parameters and buffers are bound in state_dict order, or by name where ModelNew "
                         "has each of the Model's: %s)" % (first, why))

    def run(self):
        torch = self.torch
        xs = self.views[:self.n_x]
        outs = self.views[self.n_in:]
        t0 = time.perf_counter_ns()
        with torch.no_grad():
            res = flat_outputs(self.model(*xs))
            if len(res) != len(outs):
                raise Unmappable("forward returned %d outputs, the task has %d" % (len(res), len(outs)))
            for o, r in zip(outs, res):
                if tuple(r.shape) != tuple(o.shape):
                    raise Unmappable("output shape %s, the task says %s" % (tuple(r.shape), tuple(o.shape)))
                o.copy_(r)
        return time.perf_counter_ns() - t0

    def load_candidate(self, path):
        """The candidate's module run once, its load_inline served from the prebuilt extensions
        beside it (kernel.so), and the problem module read for the constructor's arguments."""
        with open(PROBLEM) as fh:
            self.problem_src = fh.read()
        ce = cpp_extension_module()
        ce.load_inline, ce.load = prebuilt_loader(os.path.join(os.path.dirname(path), "kernel.so"))
        cls = exec_module(self.src).get("ModelNew")
        if not isinstance(cls, type):
            raise Unmappable("the candidate defines no class ModelNew")
        self.model_cls = cls

    def serve(self):
        self.reply(HELLO, 0)
        while True:
            data = os.read(CTL_FD, CMD.size + 16)
            if not data:
                return 0
            if len(data) != CMD.size:
                return 2
            f = CMD.unpack(data)
            sets, f = f[-3], f[:-3]  # RUN's batch (sets, pad, stride): one call only, here
            if f[0] != MAGIC:
                return 2
            op, seq = f[1], f[2]
            try:
                if op == LOAD:
                    path = f[-1].split(b"\0", 1)[0].decode()
                    with open(path) as fh:
                        self.src = fh.read()
                    if self.candidate:
                        self.load_candidate(path)
                    self.reply(op, seq)
                elif op == SETUP:
                    self.setup(f)
                    self.reply(op, seq)
                elif op == RUN:
                    if f[-2] != 0:  # KG_ENTRY_TERMS: a module's forward has no error-terms entry
                        self.reply(op, seq, WS_NOSYM, msg="a PyTorch module exports no kg_error_terms")
                    elif sets > 1:
                        self.reply(op, seq, WS_ERROR, msg="a batched RUN (%d sets): not served by this runner" % sets)
                    elif self.src is None:  # calibration before LOAD: a call that does nothing
                        t0 = time.perf_counter_ns()
                        self.reply(op, seq, elapsed=time.perf_counter_ns() - t0)
                    else:
                        self.reply(op, seq, elapsed=self.run())
                elif op == SETTLE:
                    time.sleep(f[-3] / 1000.0)
                    self.reply(op, seq)
                elif op in (UPLOAD, DOWNLOAD, NOP):
                    self.reply(op, seq)
                elif op == QUIT:
                    self.reply(op, seq)
                    return 0
                else:
                    self.reply(op, seq, WS_ERROR, msg="unknown op %d" % op)
            except Exception as ex:  # noqa: BLE001 (the parent reports it; the reference failed)
                self.reply(op, seq, WS_ERROR, msg="%s: %s" % (type(ex).__name__, ex))


def main(argv):
    warnings.simplefilter("ignore")
    if len(argv) > 1 and argv[1] == "--derive":
        dims = argv[argv.index("--dims") + 1] if "--dims" in argv else ""
        name = argv[argv.index("--name") + 1] if "--name" in argv else "problem"
        # between markers: the sandbox captures stdout and stderr as one stream
        try:
            sys.stdout.write(BEGIN + "\n" + derive(argv[2], dims, name) + END + "\n")
            return 0
        except Unmappable as ex:
            sys.stdout.write("%s%s\n" % (FAIL, ex))
            return 2
        except Exception as ex:  # noqa: BLE001 (a module that fails to run: its error, named)
            sys.stdout.write("%srunning the module failed: %s: %s\n" % (FAIL, type(ex).__name__, ex))
            return 2
    if len(argv) > 1 and argv[1] == "--probe":
        import torch

        print("torch %s%s" % (torch.__version__, "" if hasattr(torch, "compile") else " (no torch.compile)"))
        return 0
    try:
        r = Runner(candidate="--candidate" in argv)
    except Exception as ex:  # noqa: BLE001
        try:
            os.write(CTL_FD, REPLY.pack(MAGIC, HELLO, 0, WS_ERROR, 0, 0, 0, 0, 0, 0, ("torch runner: %s" % ex).encode()[:399]))
        except OSError:
            pass
        return 1
    r.torch.set_num_threads(1)
    return r.serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
