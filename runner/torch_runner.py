"""kgate's torch reference runner: runs a KernelBench-format module's Model as the trusted reference,
speaking kgate-run's protocol (runner/wire.h) over the same fds and on the same arena memory (no
copies in, one copy of each result out); with --candidate it hosts the candidate's ModelNew instead,
built from the trusted side's state file alone (the problem module never enters that process). With
--derive (or --derive-serve) it hands over to torch_derive.py beside it, which derives the task
manifest from the module, and the state file a run hands both sides (kept buffers, the constructor's
arguments as data, the Model's entries)."""
import ast
import json
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
MAX_TENSORS = 1024  # KG_MAX_TENSORS (verifier/plan/task.h): inputs, and outputs, each; the wire has no bound
PROBLEM = "/kgate/lib/problem.py"  # where the reference's sandbox shows the problem module (session_start.c)
STATE = "/kgate/lib/state"  # where every torch runner's sandbox shows the trusted side's state file (torch_derive.state)


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
    """The problem module run at dims and its Model built from get_init_inputs() (seed 0, the
    mode its constructor leaves it in: the caller sets another where asked)."""
    import torch

    ns = {"__name__": "kgate_problem"}
    exec(rewrite(src, dims), ns)
    for need in ("Model", "get_inputs", "get_init_inputs"):
        if need not in ns:
            raise Unmappable("the module defines no %s (a KernelBench problem has class Model, get_inputs "
                             "and get_init_inputs)" % need)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
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


# ---- a module's state: what each of its parameters and buffers is, and the state file ----

# a normalisation's running statistics: drawn per trial like a parameter, from a distribution that
# keeps them valid (a variance positive); what the mode makes of them is the Model's business
STATISTICS = {"running_mean": "statistic", "running_var": "variance"}


def state_entries(model):
    """[(name, kind, tensor)] of a module's state: its state_dict in order (parameters and
    persistent buffers), then the buffers it keeps out of it (persistent=False). kind: "parameter";
    "statistic" or "variance" for a normalisation's running mean or variance (drawn per trial);
    "buffer" for any other buffer (a mask, an index table, a counter: kept at the values its
    constructor gives it)."""
    import torch

    out = []
    sd = model.state_dict(keep_vars=True)
    for name, t in sd.items():
        mod_name, _, attr = name.rpartition(".")
        try:
            mod = model.get_submodule(mod_name) if mod_name else model
        except AttributeError:
            mod = None
        if mod is not None and attr in mod._parameters:
            kind = "parameter"
        elif isinstance(mod, torch.nn.modules.batchnorm._NormBase) and attr in STATISTICS and \
                t.is_floating_point():
            kind = STATISTICS[attr]
        else:
            kind = "buffer"
        out.append((name, kind, t))
    for mod_name, mod in model.named_modules():
        for attr, t in mod._buffers.items():
            name = "%s.%s" % (mod_name, attr) if mod_name else attr
            if name not in sd and t is not None:
                out.append((name, "buffer", t))
    return out


def input_name(name, n_before):
    """A state entry's name as a manifest's input (dots made underscores; one of 32 characters or
    more cut, told apart by its place n_before)."""
    n = name.replace(".", "_")
    return n if len(n) < 32 else "%s_%d" % (n[:27], n_before)


def dims_key(dims):
    """One shape's dims as the state file keys them: "a=1 b=2", sorted by name."""
    return " ".join("%s=%d" % (k, dims[k]) for k in sorted(dims))


def tensor_bytes(t):
    """A tensor's elements as bytes, in its logical (row-major) order."""
    import torch

    flat = t.detach().reshape(-1).contiguous()
    return bytes(flat.view(torch.uint8)) if flat.numel() else b""


def encode(v, raw):
    """A constructor argument as data (JSON, tagged by type): what get_init_inputs() gives, carried
    to the candidate's process without any of the problem's code. Tensors go into raw."""
    import torch

    if v is None:
        return {"n": 0}
    if type(v) is bool:
        return {"b": v}
    if type(v) is int:
        return {"i": str(v)}
    if type(v) is float:
        return {"f": v.hex()}
    if type(v) is str:
        return {"s": v}
    if type(v) in (tuple, list):
        return {"t" if type(v) is tuple else "l": [encode(x, raw) for x in v]}
    if type(v) is dict:
        return {"d": [[encode(k, raw), encode(x, raw)] for k, x in v.items()]}
    if isinstance(v, torch.dtype):
        return {"dt": str(v).split(".")[-1]}
    if isinstance(v, torch.Tensor) and v.device.type == "cpu" and not v.is_sparse:
        b = tensor_bytes(v)
        raw += b
        return {"T": [str(v.dtype).split(".")[-1], list(v.shape), len(raw) - len(b), len(b)]}
    raise Unmappable("get_init_inputs() holds a %s, which kgate cannot hand to ModelNew as data (it hands "
                     "over numbers, strings, None, tuples, lists, dicts, dtypes and CPU tensors)" % type(v).__name__)


def from_raw(raw, dtype, shape, off, nbytes):
    """A private tensor of the state file's bytes [off, off+nbytes)."""
    import torch

    dt = getattr(torch, dtype)
    n = math.prod(shape)
    if n == 0:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(raw, dtype=dt, count=n, offset=off).clone().view(shape)


def decode(v, raw):
    import torch

    (tag, x), = v.items()
    if tag == "n":
        return None
    if tag == "b":
        return bool(x)
    if tag == "i":
        return int(x)
    if tag == "f":
        return float.fromhex(x)
    if tag == "s":
        return str(x)
    if tag == "t":
        return tuple(decode(e, raw) for e in x)
    if tag == "l":
        return [decode(e, raw) for e in x]
    if tag == "d":
        return {decode(k, raw): decode(e, raw) for k, e in x}
    if tag == "dt":
        return getattr(torch, x)
    if tag == "T":
        return from_raw(raw, *x)
    raise ValueError("unknown tag %r in the state file" % tag)


def read_state(path):
    """The state file (torch_derive.state): text lines for kgate, a line "json N", N bytes of JSON,
    then the raw bytes its tensors point into. (header, raw)."""
    with open(path, "rb") as fh:
        data = bytearray(fh.read())
    pos = 0
    while True:
        nl = data.index(b"\n", pos)
        line = bytes(data[pos:nl]).decode()
        pos = nl + 1
        if line.startswith("json "):
            n = int(line[5:])
            return json.loads(bytes(data[pos:pos + n])), data[pos + n:]


class Bound:
    """A module's state as bound for one shape: which of its tensors are the forward's inputs, and
    the private copies each RUN puts back first (a statistic's from the arena, a kept buffer's from
    the state file), so that a forward that updates them in place (BatchNorm in train mode) neither
    writes into the arena nor makes one call's result depend on the calls before it."""

    def __init__(self):
        self.refresh = []  # (private tensor, its source)
        # (name, its private copy or None for a parameter, the task input it is or None): a device
        # runner's batched calls bind each set's tensors (torch_device.py)
        self.entries = []

    def set(self, model, name, t):
        mod_name, _, attr = name.rpartition(".")
        mod = model.get_submodule(mod_name) if mod_name else model
        if attr in mod._parameters:
            mod._parameters[attr].data = t
        else:
            mod._buffers[attr] = t

    def bind(self, model, name, kind, src, at=None):
        """Binds entry name to src (task input at, or None for a kept buffer): a parameter to the
        arena's tensor itself; a buffer to a copy of src, put back before every call."""
        if kind == "parameter":
            self.set(model, name, src)
            self.entries.append((name, None, at))
            return
        own = src.clone()
        self.set(model, name, own)
        self.refresh.append((own, src))
        self.entries.append((name, own, at))

    def restore(self):
        for own, src in self.refresh:
            own.copy_(src)

    def restore_set(self, model, views):
        """The state for one set of a batch (views: that set's tensors, as the layout's): its
        parameters bound to the set's inputs, its statistics copied from them, its kept buffers from
        the state file; restore_set(model, the layout's views) binds the layout's own again."""
        for (name, own, at), (_, src) in zip(self.entries, self._sources()):
            if own is None:
                if at is not None:
                    self.set(model, name, views[at])
            else:
                own.copy_(src if at is None else views[at])

    def _sources(self):
        it = iter(self.refresh)
        return [(None, None) if own is None else next(it) for _, own, _ in self.entries]


# ---- the runner ----

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
        # hosting a ModelNew candidate (--candidate): the state file gives the constructor's
        # arguments, the Model's entries and its kept buffers; the candidate's module gives the class
        self.candidate = candidate
        self.model_cls = None
        self.kg, self.tdt, _ = dtype_tables()
        self.dev = dev  # on a GPU: kgate-device's arena, imported (torch_device.py); no host arena
        self.src = None
        self.state = self.raw = None  # the state file (read at LOAD)
        self.dims = None
        self.model = None
        self.bound = Bound()
        self.views = None
        self.n_in = self.n_out = self.n_x = 0
        self.consts = []  # the task's constants from SETUP: [(argument position, value)]
        self.tables = read_tables(tables_fd) if tables_fd is not None else []
        if dev is not None:
            self.in_size, self.inmap, self.outmap = 0, None, None
            return
        self.out_size = os.fstat(ARENA_FD).st_size
        try:
            # fd 5 is a paged arena's inputs, unless the arena is not paged and the tensor tables
            # took that number (runner/wire.h)
            self.in_size = os.fstat(INPUT_FD).st_size if tables_fd != INPUT_FD else 0
        except OSError:
            self.in_size = 0
        self.outmap = mmap.mmap(ARENA_FD, self.out_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.inmap = mmap.mmap(INPUT_FD, self.in_size, mmap.MAP_SHARED, mmap.PROT_READ) if self.in_size else None

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

    def shape_state(self, dims):
        """The state file's record of this shape: its entries, constructor arguments, forward inputs."""
        st = self.state["shapes"].get(dims_key(dims))
        if st is None:
            raise Unmappable("the state file has no shape %s" % dims_key(dims))
        if not st.get("ok"):
            raise Unmappable("the Model refuses shape %s: %s" % (dims_key(dims), st.get("why", "")))
        return st

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
        st = self.shape_state(dims)
        if self.model is None or dims != self.dims:
            self.model = None  # the last shape's, dropped before the next is built
            torch = self.torch
            if self.candidate:
                init = decode(st["init"], self.raw)
                torch.manual_seed(0)
                self.model = self.model_cls(*init)
            else:
                _, self.model = instantiate(self.src, dims)
            if self.state["mode"] != "problem":  # a policy's word: both modules alike
                self.model.train(self.state["mode"] == "train")
            self.dims = dims
        self.n_x = st["n_x"]
        if self.n_x > self.n_in:
            raise Unmappable("the task has %d inputs; the module's forward takes %d" % (self.n_in, self.n_x))
        pairs = self.binding(st) if self.candidate else [(e["name"], e) for e in st["entries"]]
        self.table = list(self.tables[table][2])  # a device runner's batched calls lay out each set's
        # the Model's parameters and drawn statistics are the arena's tensors (its inputs after the
        # forward's own); its kept buffers the state file's values, both sides alike
        self.bound = Bound()
        for name, e in pairs:
            if e["input"] is not None:
                if not 0 <= e["input"] < self.n_in:
                    raise Unmappable("the state file binds %s to input %d of %d" % (e["name"], e["input"], self.n_in))
                src = self.views[e["input"]]
            else:
                src = from_raw(self.raw, e["dtype"], e["shape"], e["off"], e["nbytes"])
                if self.dev is not None and self.views:  # on a GPU: the kept value on the arena's device
                    src = src.to(self.views[0].device)
            self.bound.bind(self.model, name, "parameter" if e["kind"] == "parameter" else "buffer", src,
                            e["input"])

    def binding(self, st):
        """[(ModelNew's entry name, the Model's entry)]: every Model entry bound to the ModelNew entry
        of the same name, shape and dtype; a Model parameter left over by shape, where exactly one
        parameter of the Model and one entry of ModelNew are left with that shape and dtype. A
        parameter bound neither way is an error that names both sides' entries. A kept buffer or a
        statistic that ModelNew has under no name of the Model's stays the Model's (a ModelNew may
        build its own mask, or use none of the running statistics)."""
        mine = state_entries(self.model)
        have = {n: t for n, _, t in mine}

        def sig(shape, dt):
            return tuple(shape), dt

        def tsig(t):
            return sig(t.shape, str(t.dtype).split(".")[-1])

        pairs, used, left = [], set(), []
        for e in st["entries"]:
            t = have.get(e["name"])
            if t is not None and tsig(t) == sig(e["shape"], e["dtype"]):
                pairs.append((e["name"], e))
                used.add(e["name"])
            elif e["kind"] == "parameter":
                left.append(e)
        for e in left:
            want = sig(e["shape"], e["dtype"])
            ours = [n for n, _, t in mine if n not in used and tsig(t) == want]
            same = [x for x in left if sig(x["shape"], x["dtype"]) == want]
            if len(ours) == 1 and len(same) == 1:
                pairs.append((ours[0], e))
                used.add(ours[0])
            else:
                raise Unmappable(self.unbound(e, mine, used, ours, same))
        return pairs

    def unbound(self, e, mine, used, ours, same):
        """Why the Model's parameter e is bound to nothing, naming both sides' entries (the reply's
        400 bytes: the first ones of each side, then how many more)."""
        def show(shape, dt):
            return "torch.%s %s" % (dt, tuple(shape))

        def listed(pairs, room=8):
            words = ["%s [%s]" % (n, ",".join(str(d) for d in shape)) for n, shape in pairs]
            return ", ".join(words[:room]) + (" +%d more" % (len(words) - room) if len(words) > room else "")

        names = [n for n, _, _ in mine]
        if e["name"] in names:
            i = names.index(e["name"])
            t = mine[i][2]
            head = "ModelNew's state_dict entry %d, %s, is %s; the Model's is %s: ModelNew has no entry %s of " \
                "that shape and dtype" % (i, e["name"], show(t.shape, str(t.dtype).split(".")[-1]),
                                          show(e["shape"], e["dtype"]), e["name"])
        else:
            head = "the Model's %s %s has no ModelNew entry of that name, shape and dtype" % (
                e["name"], show(e["shape"], e["dtype"]))
        why = "; by shape it could be any of ModelNew's %s" % ", ".join(ours) if len(ours) > 1 or len(same) > 1 else \
            "; ModelNew has no other entry of that shape"
        return "%s%s. Model: %s; ModelNew: %s" % (
            head, why, listed((x["name"], x["shape"]) for x in self.shape_entries()),
            listed((n, tuple(t.shape)) for n, _, t in mine) or "none")

    def shape_entries(self):
        return self.shape_state(self.dims)["entries"]

    def run(self):
        torch = self.torch
        xs = with_consts(self.views[:self.n_x], self.consts)
        outs = self.views[self.n_in:]
        t0 = time.perf_counter_ns()
        with torch.no_grad():
            self.bound.restore()
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

    def load_state(self):
        self.state, self.raw = read_state(STATE)

    def load_candidate(self, path):
        """The candidate's module run once, its load_inline served from the prebuilt extensions
        beside it (kernel.so); the constructor's arguments come from the state file, as data."""
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
                    self.load_state()
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
    if len(argv) > 1 and (argv[1].startswith("--derive") or argv[1] == "--state"):
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
        sys.modules["kgate_torch_device"] = mod  # the module finds itself there (torch_device.main)
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
