"""kgate's torch reference runner: runs a KernelBench-format module's Model as the trusted reference,
speaking kgate-run's protocol (runner/wire.h) over the same fds and on the same arena memory (no
copies in, one copy of each result out). With --derive (or --derive-serve) it hands over to
torch_derive.py beside it, which derives the task manifest from the module instead."""
import ast
import math
import mmap
import os
import struct
import sys
import time
import warnings

# kg_wire_cmd / kg_wire_reply, little-endian x86-64 layout (checked against sizeof in the tests)
CMD = struct.Struct("<IIQQIIIIII512sIIQII")
REPLY = struct.Struct("<IIQiiQQQII400s")
# the tensor tables (runner/wire.h): header, table heads, kg_wire_tensor entries
TABLES = struct.Struct("<II")
TABLE = struct.Struct("<QII")
TENSOR = struct.Struct("<Qii8q")
MAGIC = 0x6B67775A
HELLO, LOAD, SETUP, UPLOAD, _RETIRED_FLUSH, RUN, DOWNLOAD, SETTLE, NOP, QUIT = range(1, 11)
ENTRY_COMPILED = 2  # KG_ENTRY_COMPILED: a baseline's torch.compile of the module (a device runner's)
WS_OK, WS_ERROR, WS_NOSYM = 0, 1, 3
CTL_FD, ARENA_FD, INPUT_FD = 3, 4, 5
MAX_TENSORS = 1024  # KG_MAX_TENSORS (verifier/task.h): inputs, and outputs, each; the wire has no bound
PROBLEM = "/kgate/lib/problem.py"  # where the sandbox shows the problem module (session_start.c)


class Unmappable(Exception):
    """The module's task cannot be expressed as a kgate task (exit 2, with the reason)."""


def dtype_tables():
    import torch

    kg = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int32: 3, torch.int64: 4, torch.uint8: 5,
          torch.bool: 6}
    names = {0: "f32", 1: "f16", 2: "bf16", 3: "i32", 4: "i64", 5: "u8", 6: "bool"}
    return kg, {v: k for k, v in kg.items()}, names


# The integer names of a module's top level: literals (`N = 4096`), chains (`height = width = 128`),
# tuples (`D, H, W = 16, 32, 32`), expressions (`M = 1024 * 2`, `dim = batch * 4`) and names given
# other names (`groups = in_channels`), evaluated here from the syntax alone (nothing of the module
# runs). A name bound any other way at the top level (an import, a def, a loop, an if) is not one.
_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b}


def _int_value(node, env):
    """The value of an integer expression over int literals and the names in env, else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _int_value(node.operand, env)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        a, b = _int_value(node.left, env), _int_value(node.right, env)
        if a is None or b is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0):
            return None
        if isinstance(node.op, ast.Pow) and not (0 <= b <= 64 and abs(a) <= 1 << 16):
            return None  # a size, not a computation
        r = _INT_OPS[type(node.op)](a, b)
        return r if abs(r) < 1 << 62 else None
    return None


def _bindings(tg, value):
    """(name, value node or None) for each name an assignment target binds."""
    if isinstance(tg, ast.Name):
        yield tg.id, value
    elif isinstance(tg, (ast.Tuple, ast.List)):
        whole = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(tg.elts) and \
            not any(isinstance(e, ast.Starred) for e in value.elts + tg.elts)
        for i, e in enumerate(tg.elts):
            yield from _bindings(e.value if isinstance(e, ast.Starred) else e, value.elts[i] if whole else None)


def assigned(node):
    """(name, value node or None) of a simple top-level assignment, each name of a chain or tuple;
    None for any other statement."""
    if isinstance(node, ast.Assign):
        return [b for tg in node.targets for b in _bindings(tg, node.value)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, node.value)] if node.value is not None else []
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value))]
    return None


def _bound_elsewhere(node):
    """Names a top-level statement that is not a simple assignment binds (not inside defs)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.append(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(n.name)
        elif not isinstance(n, ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))
    return out


def module_dims(tree):
    """{name: (value, derived)} of the top-level integer names, in the order they first appear;
    derived when the last assignment reads another name (`groups = in_channels`): it follows."""
    env, order, derived = {}, {}, {}
    for node in tree.body:
        pairs = assigned(node)
        if pairs is None:
            for n in _bound_elsewhere(node):
                env[n] = None
            continue
        vals = [(n, _int_value(v, env) if v is not None else None, v) for n, v in pairs]
        for n, val, v in vals:  # Python binds after evaluating the whole right side
            env[n] = val
            order.setdefault(n, len(order))
            derived[n] = v is not None and any(isinstance(x, ast.Name) and x.id != n for x in ast.walk(v))
    names = sorted((n for n in order if type(env.get(n)) is int), key=order.get)
    return {n: (env[n], derived[n]) for n in names}


def int_constants(src):
    """Top-level integer names, in order, with their values: the dims a user may set."""
    return {n: v for n, (v, _) in module_dims(ast.parse(src)).items()}


def rewrite(src, dims):
    """The module with its top-level integer names set to dims: each assignment of a name is
    followed by the name set to its value, so names derived from it follow, and each name of a chain
    or tuple can be set on its own."""
    tree = ast.parse(src)
    known = module_dims(tree)
    missing = sorted(set(dims) - set(known))
    if missing:
        raise Unmappable("--dims names %s, which the module does not assign as a top-level integer (it "
                         "assigns %s)" % (", ".join(missing), ", ".join(known) or "none"))
    body = []
    for node in tree.body:
        body.append(node)
        for n, _ in assigned(node) or []:
            if n in dims:
                body.append(ast.Assign([ast.Name(n, ast.Store())], ast.Constant(int(dims[n]))))
    tree.body = body
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


def scalar_tensor(v):
    """A Python number a forward returns (a loss as float), as the 0-dim tensor kgate maps it to:
    float32 for a float (torch's default dtype), int64 for an int, bool for a bool."""
    import torch

    if type(v) is bool:
        return torch.tensor(v, dtype=torch.bool)
    if type(v) is int:
        return torch.tensor(v, dtype=torch.int64)
    return torch.tensor(v, dtype=torch.float32)


def flat_outputs(res):
    import torch

    one = (torch.Tensor, int, float, bool)
    if isinstance(res, one):
        res = [res]
    if isinstance(res, (tuple, list)) and res and all(isinstance(r, one) for r in res):
        return [r if isinstance(r, torch.Tensor) else scalar_tensor(r) for r in res]
    raise Unmappable("forward returns %s; kgate maps a tensor, a number or a tuple of them" % type(res).__name__)


def note_consts(note):
    """A module task's constants as SETUP's note carries them after its dims ("@1=f:3.14", the
    manifest's `constants`): [(argument position, value)], in position order."""
    out = []
    for w in note.split():
        if w[0] != "@":
            continue
        at, _, tv = w[1:].partition("=")
        t, _, v = tv.partition(":")
        out.append((int(at), float(v) if t == "f" else (v == "true") if t == "b" else int(v)))
    return sorted(out)


def with_consts(xs, consts):
    """The forward's arguments: the tensors in order, each constant at its own position."""
    args = list(xs)
    for at, v in consts:
        args.insert(at, v)
    return args


def read_tables(fd):
    """The tensor tables file (runner/wire.h) read whole, and its tables checked as kgate-run
    checks them (runner/table.c): a list of [(offset, dtype, shape), ...] per table (inputs first)
    with each table's input and output counts."""
    size = os.fstat(fd).st_size
    buf = b""
    while len(buf) < size:
        more = os.pread(fd, size - len(buf), len(buf))
        if not more:
            raise ValueError("the tensor tables end early")
        buf += more
    os.close(fd)
    magic, count = TABLES.unpack_from(buf, 0)
    if magic != MAGIC or count > (len(buf) - TABLES.size) // TABLE.size:
        raise ValueError("the tensor tables' header is not one")
    out = []
    for k in range(count):
        at, n_in, n_out = TABLE.unpack_from(buf, TABLES.size + k * TABLE.size)
        n = n_in + n_out
        if at % 8 or at > len(buf) or n > (len(buf) - at) // TENSOR.size:
            raise ValueError("table %d lies outside the tensor tables" % k)
        ts = []
        for i in range(n):
            w = TENSOR.unpack_from(buf, at + i * TENSOR.size)
            if not 0 <= w[2] <= 8 or any(d < 0 for d in w[3:3 + w[2]]):
                raise ValueError("table %d: tensor %d is not one" % (k, i))
            ts.append((w[0], w[1], tuple(w[3:3 + w[2]])))
        out.append((n_in, n_out, ts))
    return out


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
    with open(ext_path, "rb") as fh:
        built = fh.read(4) == b"\x7fELF"  # else the builder's one line: no extensions

    def load_inline(name, *a, **k):
        if name in loaded:
            return loaded[name]
        if not isinstance(name, str) or not built:
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
    def __init__(self, candidate=False, tables_fd=None, dev=None):
        import torch

        self.torch = torch
        # hosting a ModelNew candidate (--candidate): the problem module gives the constructor's
        # arguments; the candidate's module gives the class
        self.candidate = candidate
        self.model_cls = None
        self.model_state = None  # (dims, the Model's state_dict names there): candidate_binding's
        self.kg, self.tdt, _ = dtype_tables()
        self.dev = dev  # on a GPU: kgate-device's arena, imported (torch_device.py); no host arena
        if dev is not None:
            self.in_size, self.inmap, self.outmap = 0, None, None
            self.src = self.dims = self.model = self.views = None
            self.n_in = self.n_out = 0
            self.consts = []
            self.tables = read_tables(tables_fd) if tables_fd is not None else []
            return
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
        self.consts = []  # the task's constants from SETUP: [(argument position, value)]
        self.tables = read_tables(tables_fd) if tables_fd is not None else []

    def reply(self, op, seq, status=WS_OK, rc=0, elapsed=0, info=0, msg=""):
        # plain write(2) and read(2): a SOCK_SEQPACKET keeps records whole, and the socket module's
        # probes (getsockname) are calls the filter does not allow
        os.write(CTL_FD, REPLY.pack(MAGIC, op, seq, status, rc, elapsed, info, 0, 0, 0, msg.encode()[:399]))

    def view(self, off, dt, shape):
        if self.dev is not None:
            return self.dev.view(off, self.tdt[dt], shape)
        n = math.prod(shape)  # 1 for a scalar (shape ())
        tdt = self.tdt[dt]
        if self.inmap is not None and off < self.in_size:
            buf, o = self.inmap, off
        else:
            buf, o = self.outmap, off - self.in_size
        # zero-copy views of the shared pages (the inputs' pages are read-only, sealed by the parent)
        return self.torch.frombuffer(buf, dtype=tdt, count=n, offset=o).view(shape)

    def setup(self, f):
        n_in, n_out, table = f[4], f[5], f[6]
        if table >= len(self.tables) or self.tables[table][:2] != (n_in, n_out):
            raise ValueError("SETUP names table %d with %d inputs and %d outputs, which the tables do not hold" %
                             (table, n_in, n_out))
        self.n_in, self.n_out = n_in, n_out
        self.views = [self.view(off, dt, shape) for off, dt, shape in self.tables[table][2]]
        note = f[-1].split(b"\0", 1)[0].decode()
        dims = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in note.split() if "=" in kv and kv[0] != "@")
        self.consts = note_consts(note)
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
        self.bound = pairs  # a device runner's batched calls bind each set's (torch_device.py)
        self.table = list(self.tables[table][2])
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
        xs = with_consts(self.views[:self.n_x], self.consts)
        outs = self.views[self.n_in:]
        t0 = time.perf_counter_ns()
        with torch.no_grad():
            res = flat_outputs(self.model(*xs))
            if len(res) != len(outs):
                raise Unmappable("forward returned %d outputs, the task has %d" % (len(res), len(outs)))
            for o, r in zip(outs, res):
                if tuple(r.shape) != tuple(o.shape):
                    raise Unmappable("output shape %s, the task says %s" % (tuple(r.shape), tuple(o.shape)))
                if (r.dtype == torch.bool) != (o.dtype == torch.bool):
                    raise Unmappable("output dtype %s, the task says %s" % (r.dtype, o.dtype))
                o.copy_(r)
        return time.perf_counter_ns() - t0

    def dev_run(self, sets, stride, entry):
        """A RUN on the device (torch_device.py): a batch of `sets` calls, or one."""
        return self.device_mod.run(self, sets, stride, entry)

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
            # RUN's batch (sets, pad, stride: a device runner's, torch_device.py) and gate (gate,
            # pad2): a Python runner's calls are never gated
            sets, stride, f = f[-5], f[-3], f[:-5]
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
                    if f[-2] not in (0, ENTRY_COMPILED) or (f[-2] == ENTRY_COMPILED and self.candidate):
                        # KG_ENTRY_TERMS, or a baseline's entry asked of a candidate
                        self.reply(op, seq, WS_NOSYM, msg="a PyTorch module exports no entry %d" % f[-2])
                    elif self.dev is not None and self.src is not None:
                        ns, tail = self.dev_run(sets, stride, f[-2])
                        self.reply(op, seq, elapsed=ns, info=tail)
                    elif f[-2] == ENTRY_COMPILED:
                        self.reply(op, seq, WS_NOSYM, msg="torch.compile is timed on a GPU runner only")
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
    if len(argv) > 1 and argv[1].startswith("--derive"):
        # the derivation of a task lives beside this file (torch_derive.py); the helpers above that
        # read a module's dims are shared with it, so a task is derived and run from the same reading
        import importlib.util

        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_derive.py")
        spec = importlib.util.spec_from_file_location("kgate_torch_derive", here)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.main(argv, sys.modules[__name__])
    if "--device-arena" in argv or "--warmup" in argv:
        # on a GPU: kgate-device's arena imported, the filter applied once CUDA is up, a Triton
        # candidate's warm-up (torch_device.py beside this file)
        import importlib.util

        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_device.py")
        spec = importlib.util.spec_from_file_location("kgate_torch_device", here)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.main(argv, sys.modules[__name__])
    if len(argv) > 1 and argv[1] == "--probe":
        import torch

        print("torch %s%s" % (torch.__version__, "" if hasattr(torch, "compile") else " (no torch.compile)"))
        return 0
    try:
        tables = int(argv[argv.index("--tables") + 1]) if "--tables" in argv else None
        r = Runner(candidate="--candidate" in argv, tables_fd=tables)
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
