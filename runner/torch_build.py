"""kgate's builder for a KernelBench ModelNew candidate (a Python module), run in the compile sandbox
as a C candidate's compiler is: `torch_build.py /work/kernel.py /work/kernel.so [FLAG...]`.

It runs the module's top-level code once, in a child process that can write no file and has a
bounded time, with torch.utils.cpp_extension's load_inline replaced by a recorder; the child hands
the extensions it asked for over a pipe, this process (where no code of the candidate's ran) checks
them again, and every extension the module asks for is built here, by kgate's own compiler command
(the C++ compiler, and nvcc for CUDA sources, with flags from a short list), and never by the
candidate's code in the run sandbox, which then loads the prebuilt module by name (torch_runner.py).
All of a module's extensions go into the one shared object kernel.so, each as the Python module its
name says (PyInit_NAME); a module with no extensions gets a kernel.so of one line of text. The module must define
a class ModelNew. Whatever this prints is the compile log; a non-zero exit is a compile error, except
NO_TOOLCHAIN: this host lacks a piece of what load_inline's build needs (kgate then names the pieces
from its own run of `torch_build.py --check`, and the candidate is not at fault).
`torch_build.py --check` says which pieces are missing here, each with the Debian package that brings
it (kgate doctor shows it), and exits 0 only when none is."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

# the flags a candidate may add to its extension's compile lines: optimisation, macros, the
# language level, the instruction set, fast math and the other code-generation switches of the
# math, warnings, OpenMP; nothing that names a file, a program or a plugin (-B, @file, -include,
# -fplugin, -wrapper, -specs, -Wl, ... are refused). Not a boundary (the module's top level runs in
# this process and can start the compiler itself): what keeps an honest module's build ordinary.
FLAG_OK = re.compile(
    r"-O[0-3sg]?|-Ofast|-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?|-U[A-Za-z_][A-Za-z0-9_]*|"
    r"-std=(c|gnu)\+\+(11|14|17|20)|-w|-W[a-z][a-z0-9-]*(=[0-9]+)?|-g[0-3]?|-fPIC|-fpic|-pthread|"
    r"-march=[a-z0-9_.-]+|-mtune=[a-z0-9_.-]+|-m(no-)?(sse[0-9.a-z]*|ssse3|avx|avx2|avx512[a-z0-9]*|fma|f16c|"
    r"bmi2?|popcnt|lzcnt|aes|pclmul|vpclmulqdq|gfni|amx-[a-z0-9]+)|-mprefer-vector-width=(128|256|512)|"
    r"-f(no-)?(fast-math|math-errno|trapping-math|signed-zeros|finite-math-only|unsafe-math-optimizations|"
    r"associative-math|reciprocal-math|strict-aliasing|omit-frame-pointer|tree-vectorize|tree-loop-vectorize|"
    r"unroll-loops|unroll-all-loops|peel-loops|inline-functions|openmp-simd|openmp)|-ffp-contract=(fast|on|off)|"
    r"-fvisibility=(hidden|default)|-fvect-cost-model=(unlimited|dynamic|cheap|very-cheap)|"
    r"--use_fast_math|-use_fast_math|-lineinfo|--expt-relaxed-constexpr|--expt-extended-lambda|-Xptxas=-v|"
    r"-fopenmp")
# what extra_ldflags may hold: OpenMP and the libraries an extension's code may call beside torch
LDFLAG_OK = re.compile(r"-fopenmp|-pthread|-l(gomp|m|pthread|cublas|cublasLt)|-O[0-3s]?")
NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
NO_TOOLCHAIN = 4  # exit status: a piece of load_inline's toolchain is missing on this host
MODULE_CPU_S = 120  # the module's top level: CPU seconds, and wall seconds, it may take
MODULE_WALL_S = 180
RECORD_MAX = 16 << 20  # bytes of sources and flags it may hand over
MAX_EXTS = 16


class BuildError(Exception):
    pass


def as_list(v):
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    return list(v)


def check_flags(flags, what):
    for f in flags:
        if not isinstance(f, str) or not FLAG_OK.fullmatch(f):
            raise BuildError("%s flag %r is not one kgate passes to its compiler (allowed: -O*, -D*, -U*, "
                             "-std=, -march=, -m<isa>, -W*, -g, -fPIC, fast math and the math -f switches, "
                             "-lineinfo, -fopenmp)" % (what, f))
    return list(flags)


def normalize(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags):
    """One load_inline call's extension as plain data, every part checked: what the module's process
    sends the builder's, which checks it again (that process ran the candidate's code)."""
    if not isinstance(name, str) or not NAME_OK.fullmatch(name):
        raise BuildError("load_inline: name %r is not a Python identifier of at most 64 characters" % (name,))
    ldflags = [f for f in as_list(extra_ldflags) if f != ""]
    for f in ldflags:
        if not isinstance(f, str) or not LDFLAG_OK.fullmatch(f):
            raise BuildError("load_inline: extra_ldflags entry %r is not passed on (allowed: -fopenmp, "
                             "-pthread, -lgomp, -lm, -lpthread, -lcublas, -lcublasLt)" % (f,))
    cpp, cu = as_list(cpp_sources), as_list(cuda_sources)
    if not all(isinstance(s, str) for s in cpp + cu):
        raise BuildError("load_inline: sources must be strings")
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, dict):
        funcs = list(functions.items())
    else:
        funcs = [(f, f) for f in (functions or [])]
    for f, doc in funcs:
        if not isinstance(f, str) or not NAME_OK.fullmatch(f):
            raise BuildError("load_inline: function name %r is not an identifier" % (f,))
    return {
        "name": name, "cpp": cpp, "cu": cu, "funcs": [[f, str(doc)] for f, doc in funcs],
        "cflags": check_flags(as_list(extra_cflags), "extra_cflags"),
        "cuflags": check_flags(as_list(extra_cuda_cflags), "extra_cuda_cflags"),
        "ldflags": ldflags,
    }


class Recorder:
    """Stands in for load_inline while the module's top level runs: records the extension and
    returns a stand-in module, whose functions are not callable while building."""

    def __init__(self):
        self.exts = []

    def load_inline(self, name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, build_directory=None,
                    verbose=False, with_cuda=None, is_python_module=True, with_pytorch_error_handling=True,
                    keep_intermediates=True, **rest):
        if not isinstance(name, str) or not NAME_OK.fullmatch(name):
            raise BuildError("load_inline: name %r is not a Python identifier of at most 64 characters" % (name,))
        if any(e["name"] == name for e in self.exts):
            raise BuildError("load_inline: two extensions are named %s" % name)
        if not is_python_module:
            raise BuildError("load_inline(is_python_module=False): kgate builds Python extension modules only")
        if extra_include_paths:
            raise BuildError("load_inline: extra_include_paths are not passed on (an extension sees torch's "
                             "headers and the system's)")
        self.exts.append(normalize(name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags,
                                   extra_ldflags))
        return Placeholder(name)

    def load(self, *a, **k):
        raise BuildError("torch.utils.cpp_extension.load builds from files; a candidate is one module: use "
                         "load_inline with the sources as strings")


class Placeholder:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        def not_yet(*a, **k):
            raise BuildError("extension %s: %s called while the module is being built (call it from "
                             "ModelNew.forward)" % (self._name, attr))
        return not_yet


def exec_module(src, name="kgate_candidate", filename="candidate.py"):
    """The module's source run as a module of its own (torch_runner.py does the same): registered
    in sys.modules with its source in linecache, so that what reads a function's or a class's
    source (torch.jit.script, inspect, typing's forward references) finds it."""
    import linecache
    import types

    mod = types.ModuleType(name)
    mod.__file__ = filename
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    sys.modules[name] = mod
    exec(compile(src, filename, "exec"), mod.__dict__)
    return mod.__dict__


def run_module(path, rec):
    os.environ.setdefault("ROCM_HOME", "/nonexistent")  # else cpp_extension asks a shell for hipcc
    import torch.utils.cpp_extension as ce

    # the module's constants as the run sandbox's runner shows them (torch_runner.py): no ROCm, and
    # CUDA_HOME only where the toolkit is, so that the top level takes the same branches in both
    ce.ROCM_HOME = None
    if ce.CUDA_HOME and not os.path.exists(ce.CUDA_HOME):
        ce.CUDA_HOME = None

    src = open(path).read()
    ce.load_inline = rec.load_inline
    ce.load = rec.load
    ns = exec_module(src)
    if not isinstance(ns.get("ModelNew"), type):
        raise BuildError("the module defines no class ModelNew (a KernelBench candidate is a ModelNew "
                         "module with the Model's constructor and forward)")


def landlock_no_writes():
    """Landlock with every write right handled and none granted: this process and its children can
    create, change, rename or remove no file anywhere. False where the kernel has no Landlock."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    create, restrict = 444, 446  # the same number on every architecture
    abi = libc.syscall(ctypes.c_long(create), None, ctypes.c_long(0), ctypes.c_long(1))
    if abi < 1:
        return False
    access = 0
    for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12):  # write a file; remove and make every kind of node
        access |= 1 << bit
    if abi >= 2:
        access |= 1 << 13  # refer (link and rename across directories)
    if abi >= 3:
        access |= 1 << 14  # truncate
    attr = ctypes.c_uint64(access)
    fd = libc.syscall(ctypes.c_long(create), ctypes.byref(attr), ctypes.c_long(8), ctypes.c_long(0))
    if fd < 0:
        return False
    ok = libc.syscall(ctypes.c_long(restrict), ctypes.c_long(fd), ctypes.c_long(0)) == 0
    os.close(fd)
    return ok


def import_refusal(ex):
    """A module's failed import, named: Triton where the torch here has none is the host's limit (a
    Triton ModelNew runs on a GPU host whose torch brings Triton), not the module's mistake."""
    import torch

    name = getattr(ex, "name", None) or ""
    if name == "triton" or name.startswith("triton."):
        return ("the module imports Triton, and the torch here (%s) has none: a Triton ModelNew is verified only "
                "on a GPU host whose torch has Triton (its kernels are compiled there, before the timed calls)" %
                torch.__version__)
    return "running the module's top level failed: %s: %s" % (type(ex).__name__, ex)


def record_child(path, w):
    """In a child of its own: the module's top level, unable to write a byte of any file (RLIMIT_FSIZE
    0 and Landlock) and bounded in CPU time; what it asked load_inline for goes to the parent."""
    import json
    import resource
    import signal

    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the bound fails, not the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (MODULE_CPU_S, MODULE_CPU_S))
        landlock_no_writes()
        rec = Recorder()
        run_module(path, rec)
        out = {"exts": rec.exts}
    except BuildError as ex:
        out = {"error": str(ex)}
    except SyntaxError as ex:
        out = {"error": "the module does not parse: %s (line %s)" % (ex.msg, ex.lineno)}
    except ImportError as ex:
        out = {"error": import_refusal(ex)}
    except BaseException as ex:  # noqa: BLE001 (the module's own failure, named)
        out = {"error": "running the module's top level failed: %s: %s" % (type(ex).__name__, ex)}
    try:
        data = json.dumps(out).encode()
    except (TypeError, ValueError) as ex:
        data = json.dumps({"error": "load_inline's arguments are not plain strings: %s" % ex}).encode()
    sys.stdout.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(w, view):]
    os._exit(0)


def record(path):
    """The extensions the module asks for: its top level run in a confined child (record_child), its
    answer read within a deadline and checked again here, where no code of the candidate's ran."""
    import json
    import select
    import signal
    import time

    r, w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        record_child(path, w)
    os.close(w)
    buf, deadline = bytearray(), time.monotonic() + MODULE_WALL_S
    try:
        while len(buf) <= RECORD_MAX:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                raise BuildError("the module's top level ran past %d s" % MODULE_WALL_S)
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
        else:
            raise BuildError("the module asked for more than %d MiB of sources" % (RECORD_MAX >> 20))
    finally:
        os.close(r)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status = os.waitpid(pid, 0)
    try:
        got = json.loads(bytes(buf).decode())
    except ValueError:
        raise BuildError("the module's top level ended its process (wait status %d) before saying what it "
                         "builds" % status) from None
    if not isinstance(got, dict):
        raise BuildError("the module's process answered nonsense")
    if "error" in got:
        raise BuildError(str(got["error"]))
    exts = got.get("exts")
    if not isinstance(exts, list) or len(exts) > MAX_EXTS:
        raise BuildError("a module builds at most %d extensions" % MAX_EXTS)
    names, out = set(), []
    for e in exts:
        if not isinstance(e, dict) or not isinstance(e.get("funcs"), list) or \
                not all(isinstance(f, list) and len(f) == 2 for f in e["funcs"]):
            raise BuildError("the module's process answered nonsense")
        n = normalize(e.get("name"), e.get("cpp"), e.get("cu"), dict((str(a), b) for a, b in e["funcs"]),
                      e.get("cflags"), e.get("cuflags"), e.get("ldflags"))
        if n["name"] in names:
            raise BuildError("load_inline: two extensions are named %s" % n["name"])
        names.add(n["name"])
        out.append(n)
    return out


def cuda_home():
    h = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    return h if os.path.isfile(os.path.join(h, "bin", "nvcc")) else None


def torch_cuda():
    """The CUDA version the torch here was built with ("13.0"), None where it has no CUDA."""
    import torch

    return getattr(torch.version, "cuda", None)


def check_cuda(exts):
    """A CUDA extension is built only where it can run: the torch here has CUDA (its c10_cuda and
    torch_cuda to link against, and a device runner that hosts the module on kgate-device's memory)
    and the toolkit's nvcc is here. Each is a compile error naming what is missing, never exit 3: the
    module's own claim of CUDA sources must not make its verdict "not verified"."""
    import torch

    for e in exts:
        if not e["cu"]:
            continue
        if not torch_cuda():
            raise BuildError("extension %s has CUDA sources, and the torch here (%s) has no CUDA: a CUDA ModelNew "
                             "is built and run only where kgate's Python has a torch with CUDA, on a GPU host" %
                             (e["name"], torch.__version__))
        if not cuda_home():
            raise BuildError("extension %s has CUDA sources and no CUDA toolkit is here (no nvcc under $CUDA_HOME "
                             "or /usr/local/cuda)" % e["name"])


class NoToolchain(Exception):
    pass


def toolchain():
    """The pieces of what build() runs and includes that this host lacks, each named with the
    Debian package that brings it: the C++ compiler (on the sandbox's PATH), torch's C++ headers and
    the pybind11 and Python headers they include (torch/extension.h pulls in torch/python.h), the
    libraries the extension links against, and the binutils that keep two extensions apart."""
    missing = []
    try:
        import torch.utils.cpp_extension as ce
        ce_incs, ce_libs = list(ce.include_paths()), list(ce.library_paths())
    except ImportError as ex:
        missing.append(missing_import(ex))
        ce_incs, ce_libs = [], []
    py_inc = sysconfig.get_paths()["include"]
    incs = ce_incs + [py_inc, "/usr/local/include", "/usr/include"]
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    libdirs = ce_libs + ["/usr/local/lib", "/usr/lib/" + arch, "/usr/lib"]
    path = "/usr/bin:/bin"  # the compile sandbox's (backend.c)
    if not shutil.which("c++", path=path):
        missing.append("the C++ compiler c++ (Debian: g++)")
    for h, what, pkg in (("torch/extension.h", "torch's C++ headers", "libtorch-dev"),
                         ("pybind11/pybind11.h", "pybind11's headers", "pybind11-dev")):
        if not any(os.path.isfile(os.path.join(d, h)) for d in incs):
            missing.append("%s, %s (Debian: %s)" % (what, h, pkg))
    if not os.path.isfile(os.path.join(py_inc, "Python.h")):
        missing.append("Python's headers, %s (Debian: python3-dev)" % os.path.join(py_inc, "Python.h"))
    for lib in ("c10", "torch", "torch_cpu", "torch_python"):
        if not any(os.path.isfile(os.path.join(d, "lib%s.so" % lib)) for d in libdirs):
            missing.append("torch's library lib%s.so (Debian: libtorch-dev)" % lib)
    for tool in ("ld", "nm", "objcopy"):
        if not shutil.which(tool, path=path):
            missing.append("%s (Debian: binutils)" % tool)
    return missing


def missing_import(ex):
    # torch.utils.cpp_extension imports setuptools, which python3-torch does not bring along
    return "Python's %s, which torch.utils.cpp_extension imports (Debian: python3-%s)" % (ex.name, ex.name)


def cpp_extension_importable():
    """Every ModelNew's build imports torch.utils.cpp_extension (its top level runs with load_inline
    recorded): where that import fails for want of a package, the host is at fault, not the module."""
    try:
        import torch.utils.cpp_extension  # noqa: F401
    except ImportError as ex:
        raise NoToolchain("this host cannot build ModelNew modules: missing " + missing_import(ex))


def build(exts, out, work):
    import torch
    import torch.utils.cpp_extension as ce

    missing = toolchain() if exts else []
    if missing:
        raise NoToolchain("this host cannot build load_inline extensions: missing " + "; ".join(missing))
    check_cuda(exts)
    if not exts:
        # not an ELF file: the runner then serves no extension (and the compile cache keeps it)
        with open(out, "w") as fh:
            fh.write("kgate-build: no extensions\n")
        print("kgate-build: no extensions (a PyTorch-only ModelNew)")
        return
    cuda_exts = any(e["cu"] for e in exts)
    incs = ["-I" + p for p in include_paths(ce, cuda_exts)] + ["-I" + sysconfig.get_paths()["include"]]
    libdirs = [p for p in ce.library_paths() if os.path.isdir(p)]
    abi = "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI)
    std = cxx_std(ce)
    objs, cuda = [], False
    for e in exts:
        defs = ["-DTORCH_EXTENSION_NAME=%s" % e["name"], "-DTORCH_API_INCLUDE_EXTENSION_H", abi]
        # load_inline's own layout: the C++ sources behind torch/extension.h, then the bindings
        main = ["#include <torch/extension.h>"] + e["cpp"]
        if e["funcs"]:
            main.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
            for f, doc in e["funcs"]:
                main.append('m.def("%s", &%s, %s);' % (f, f, '"' + re.sub(r'[^A-Za-z0-9 _.,:-]', "", str(doc)) + '"'))
            main.append("}")
        cpp = os.path.join(work, "%s.cpp" % e["name"])
        with open(cpp, "w") as fh:
            fh.write("\n".join(main) + "\n")
        obj = cpp + ".o"
        cmds = [["c++", "-O3", std, "-fPIC", "-c", "-w"] + defs + incs + e["cflags"] + [cpp, "-o", obj]]
        mine = [obj]
        if e["cu"]:
            home = cuda_home()
            if not home:
                raise BuildError("extension %s has CUDA sources and no CUDA toolkit is here" % e["name"])
            cuda = True
            cu = os.path.join(work, "%s_cuda.cu" % e["name"])
            with open(cu, "w") as fh:
                fh.write("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" +
                         "\n".join(e["cu"]) + "\n")
            cobj = cu + ".o"
            # load_inline's own nvcc defaults (torch's COMMON_NVCC_FLAGS): a kernel written for it
            # builds here as it does there; the extension's flags from the same list as C++'s
            cmds.append([os.path.join(home, "bin", "nvcc"), "-O3", std, "-Xcompiler", "-fPIC", "-c",
                         "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                         "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"] + arch_flags() +
                        defs + incs + e["cuflags"] + [cu, "-o", cobj])
            mine.append(cobj)
        # the C++ and the CUDA halves at once: each takes tens of seconds behind torch's headers
        sh_all(cmds)
        # torch's load_inline makes a shared object of each extension, so two of them may each define
        # a `forward`; in the one kernel.so each extension's own definitions are made local to it
        objs += [own_symbols(e["name"], mine, work)] if len(exts) > 1 else mine
    libs = ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    if cuda:
        home = cuda_home()
        libdirs.append(os.path.join(home, "lib64"))
        libs += ["-lc10_cuda", "-ltorch_cuda", "-lcudart"]
    # OpenMP code needs libgomp on the link line (torch may bring it, or a copy of its own)
    omp = any("-fopenmp" in e["cflags"] + e["ldflags"] for e in exts)
    extra = []
    for e in exts:
        extra += [f for f in e["ldflags"] if f not in extra]
    ld = ["c++", "-shared", "-o", out] + (["-fopenmp"] if omp else []) + objs + ["-L" + d for d in libdirs] + \
         ["-Wl,-rpath," + d for d in libdirs] + libs + extra
    sh(ld)
    print("kgate-build: %d extension(s) built: %s" % (len(exts), ", ".join(e["name"] for e in exts)))


def cxx_std(ce):
    """The C++ standard torch's own load_inline compiles with (its headers may need it: C++17 up to
    torch 2.x, C++20 where a later torch asks for it), read from torch.utils.cpp_extension itself."""
    import inspect

    try:
        src = inspect.getsource(ce)
    except (OSError, TypeError):
        return "-std=c++17"
    return "-std=c++20" if "-std=c++20" in src else "-std=c++17"


def include_paths(ce, cuda):
    """torch's header directories, with CUDA's where an extension has CUDA sources (torch 2's
    include_paths(device_type=), 1.x's include_paths(cuda=))."""
    if not cuda:
        return ce.include_paths()
    try:
        return ce.include_paths(device_type="cuda")
    except TypeError:
        return ce.include_paths(cuda=True)


def own_symbols(name, objs, work):
    """The extension's objects as one relocatable object whose strong definitions (functions and
    data of its sources, whatever their names) are local to it, PyInit_NAME alone global: two
    extensions' `forward`s then no longer meet at the link. Weak and COMDAT definitions (inline
    functions, templates) stay as they are: the linker keeps one copy of each, as it would."""
    one = os.path.join(work, "%s.ext.o" % name)
    sh(["ld", "-r", "-o", one] + objs)
    p = subprocess.run(["nm", "-g", "--defined-only", one], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode:
        raise BuildError("nm %s.ext.o: %s" % (name, p.stdout.decode("utf-8", "replace")[-500:]))
    keep = "PyInit_%s" % name
    local = []
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRGS" and f[2] != keep:
            local.append(f[2])
    if local:
        lst = os.path.join(work, "%s.local" % name)
        with open(lst, "w") as fh:
            fh.write("\n".join(local) + "\n")
        sh(["objcopy", "--localize-symbols=" + lst, one])
    return one


def arch_flags():
    a = os.environ.get("KGATE_CUDA_ARCH", "")
    if re.match(r"^[0-9]{2,3}a?$", a):
        return ["-gencode=arch=compute_%s,code=sm_%s" % (a, a)]
    return []


def sh_all(cmds):
    """Each command at once; their output in order; the first failure raised."""
    for c in cmds:
        print("$ " + " ".join(c))
    sys.stdout.flush()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for c in cmds]
    failed = 0
    for p in procs:
        out = p.communicate()[0].decode("utf-8", "replace")
        if out:
            print(out[-6000:])
        failed = failed or p.returncode
    if failed:
        raise BuildError("the compiler exited with %d" % failed)


def sh(cmd):
    print("$ " + " ".join(cmd))
    sys.stdout.flush()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode("utf-8", "replace")
    if out:
        print(out[-6000:])
    if p.returncode:
        raise BuildError("the compiler exited with %d" % p.returncode)


def main(argv):
    if argv[1:] == ["--check"]:
        missing = toolchain()
        print("missing " + "; ".join(missing) if missing else "ok")
        return 1 if missing else 0
    if len(argv) < 3:
        print("usage: torch_build.py MODULE.py OUT.so [FLAG...] | torch_build.py --check")
        return 2
    try:
        # kgate's --flag (the policy allowed them): on every extension's compile lines
        extra = check_flags(argv[3:], "--flag")
        cpp_extension_importable()
        exts = record(argv[1])
        for e in exts:
            e["cflags"] += extra
            e["cuflags"] += extra
        build(exts, argv[2], os.path.dirname(os.path.abspath(argv[2])))
    except NoToolchain as ex:
        print("kgate-build: %s" % ex)
        return NO_TOOLCHAIN
    except BuildError as ex:
        print("kgate-build: %s" % ex)
        return 1
    except SyntaxError as ex:
        print("kgate-build: the module does not parse: %s (line %s)" % (ex.msg, ex.lineno))
        return 1
    except Exception as ex:  # noqa: BLE001 (the module's own failure, named)
        print("kgate-build: running the module's top level failed: %s: %s" % (type(ex).__name__, ex))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
