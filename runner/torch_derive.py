"""kgate's derivation of a task manifest from a KernelBench-format module (class Model, get_inputs,
get_init_inputs), without running the model at its real size: the inputs, the Model's parameters and
buffers (state_dict order) and one forward are built on torch's meta device (shapes and dtypes, no
data), each tensor dim is fitted as an affine expression in the module's top-level integer names
from meta runs with each name moved, and the result is checked by one real forward on the CPU at
dims shrunk until the check is small. Where the meta forward fails (an op without a meta kernel),
the shapes are fitted from small real forwards instead. Loaded by torch_runner.py (--derive,
--derive-serve), whose helpers that read a module's dims it shares."""
import ast
import contextlib
import inspect
import json
import os
import sys
import time
import warnings

# the check's forward: all its tensors (inputs, parameters, outputs) at most this many elements
# where the sizes allow (1 MiB of f32), and never more than CAP (where they cannot shrink so far: a
# whole model's parameters, VGG19's 140 million, 1 GiB of f32, which the sandbox's 8 GiB holds; the
# forward at the smallest sizes takes seconds, within the module's time bound)
LIMIT = 1 << 18
CAP = LIMIT * 1024
NAME_LEN, EXPR_LEN, MAX_SYMS = 32, 128, 16  # verifier/plan/task.h: KG_NAME_LEN, KG_EXPR_LEN; expr.h: KG_MAX_SYMS
SMALL = 4096  # elements: a factory's tensor built for real where a constructor must read it
BEGIN, END, FAIL = "--- kgate task ---", "--- end ---", "kgate-derive: "  # --derive's markers
MARK = "--- kgate derive "  # verifier/plan/torchderive.c finds a module's output after it
STAGES = {"module": "running the module's top level", "inputs": "get_inputs()",
          "init": "building the Model", "forward": "the Model's forward"}
# torch's factory functions: on the meta device unless told a device (torch 1.13 has no
# `with torch.device('meta')`; its TorchFunctionMode sees factories, as 2.x's does)
FACTORIES = ("empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint", "randperm",
             "normal", "arange", "range", "linspace", "logspace", "eye", "tensor", "as_tensor", "asarray",
             "scalar_tensor", "tril_indices", "triu_indices", "bartlett_window", "blackman_window",
             "hamming_window", "hann_window", "kaiser_window")


def halve(start, names, total, limit):
    """start with the dims among names halved, the largest first, while total (elements, None for
    a size the module refuses) stays above limit; a halving that does not lower it blocks that name.
    (dims, total) at the end."""
    dims, cur, blocked = dict(start), total(start), set()
    for _ in range(64 * max(1, len(names))):
        if cur is None or cur <= limit:
            break
        cands = [n for n in names if n not in blocked and dims[n] >= 4]
        if not cands:
            # names tied to each other (a broadcast that needs batch_size == input_shape[0]): each
            # blocked alone, all of them halved together may still shrink
            tied = [n for n in names if dims[n] >= 4]
            trial = dict(dims, **{n: dims[n] // 2 for n in tied})
            t = total(trial) if len(tied) > 1 else None
            if t is None or t >= cur:
                break
            dims, cur = trial, t
            continue
        n = max(cands, key=lambda m: dims[m])
        trial = dict(dims, **{n: dims[n] // 2})
        t = total(trial)
        if t is None or t >= cur:
            blocked.add(n)
        else:
            dims, cur = trial, t
    return dims, cur


class Failed(Exception):
    """The module raised while running at one stage (module, inputs, init, forward)."""

    def __init__(self, stage, ex):
        # the first sentence: torch's "no kernel for this backend" goes on for a page
        words = str(ex).strip().splitlines()[0] if str(ex).strip() else ""
        cut = words.find(". ")
        words = words[:cut + 1] if 0 < cut < 200 else (words[:200] + "..." if len(words) > 200 else words)
        super().__init__("%s: %s" % (type(ex).__name__, words))
        self.stage = stage
        self.cause = ex


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def value(e, dims):
    """A dim's value at dims: e is an int, or (c0, [(name, coefficient), ...])."""
    return e if isinstance(e, int) else e[0] + sum(a * dims[n] for n, a in e[1])


def render(e):
    if isinstance(e, int):
        return str(e)
    c0, terms = e
    s = ""
    for n, a in sorted(terms, key=lambda t: t[1] < 0):  # "height - kernel_size + 1"
        term = n if abs(a) == 1 else "%d*%s" % (abs(a), n)
        s = (("-" if a < 0 else "") + term) if not s else "%s %s %s" % (s, "-" if a < 0 else "+", term)
    return s if c0 == 0 else "%s %s %d" % (s, "+" if c0 > 0 else "-", abs(c0))


def flat(d):
    return [s for t in d[0] + (d[1] or []) for s in t[3]]


def signature(d):
    """What must not change when a dim moves: each tensor's name, role, dtype and rank."""
    return [(t[0], t[1], t[2], len(t[3])) for t in d[0] + (d[1] or [])]


class Deriver:
    """One module's derivation (src: its text; name: the task's)."""

    def __init__(self, rt, src, name):
        import torch
        from torch.overrides import TorchFunctionMode

        self.rt, self.torch, self.src, self.name = rt, torch, src, name
        self.codes, self.memo, self.kind = {}, {}, True
        self.consts = None  # the forward's non-tensor arguments from get_inputs(): [(position, name, value)]
        self.kept = {}  # dims -> the Model's kept buffers there [(name, dtype, shape)]
        self.mode = "problem"  # the Model's mode: as its constructor leaves it, or "train", "eval"
        factories = {getattr(torch, f) for f in FACTORIES if hasattr(torch, f)}

        class Meta(TorchFunctionMode):
            """Factories on the meta device; with small, those of at most SMALL elements real (a
            Model whose constructor reads a value, `torch.linspace(...).item()`, still builds)."""

            def __init__(self, small=False):
                super().__init__()
                self.small = small

            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = dict(kwargs or {})
                # nn modules pass device=None through factory_kwargs: that is "the default" too
                if func in factories and kwargs.get("device") is None and "out" not in kwargs and \
                        not any(isinstance(a, torch.Tensor) for a in args):
                    kwargs["device"] = "meta"
                    t = func(*args, **kwargs)
                    if not (self.small and t.numel() <= SMALL):
                        return t
                    kwargs.pop("device")
                return func(*args, **kwargs)

        self.meta_mode = Meta
        # the integers of top-level lists and tuples (`layer_sizes = [16384, 16384]`): not dims of
        # the task, but sizes the check's forward may shrink ("layer_sizes[0]")
        self.elements = {}
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)) and \
                    all(isinstance(t, ast.Name) for t in node.targets):
                for i, e in enumerate(node.value.elts):
                    if isinstance(e, ast.Constant) and type(e.value) is int and e.value >= 4:
                        self.elements["%s[%d]" % (node.targets[-1].id, i)] = e.value

    def code(self, dims):
        key = tuple(sorted(dims.items()))
        if key not in self.codes:
            src = self.src
            elems = {k: v for k, v in dims.items() if "[" in k and v != self.elements.get(k)}
            if elems:
                tree = ast.parse(src)
                for node in tree.body:
                    if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
                        for i, e in enumerate(node.value.elts):
                            k = "%s[%d]" % (getattr(node.targets[-1], "id", ""), i)
                            if k in elems:
                                e.value = elems[k]
                src = ast.unparse(tree)
            self.codes[key] = self.rt.rewrite(src, {k: v for k, v in dims.items() if "[" not in k})
        return self.codes[key]

    def describe(self, dims, meta, upto="forward"):
        """(inputs, outputs) at dims: lists of (name, role, torch dtype, shape); outputs None when
        upto stops before the forward ("inputs": get_inputs only; "init": and the Model). meta:
        True (on the meta device), "small" (so, but the small tensors of the module's top level,
        get_inputs and the constructor real, then moved to meta), False (real, on the CPU)."""
        torch, rt = self.torch, self.rt

        def staged(stage, fn, small=meta == "small"):
            try:
                with self.meta_mode(small) if meta else contextlib.nullcontext():
                    return fn()
            except rt.Unmappable:
                raise
            except Exception as ex:  # noqa: BLE001 (the module's own failure, named with its stage)
                raise Failed(stage, ex) from None

        code = self.code(dims)
        ns = {"__name__": "kgate_problem"}
        staged("module", lambda: exec(code, ns))
        for need in ("Model", "get_inputs", "get_init_inputs"):
            if need not in ns:
                raise rt.Unmappable("the module defines no %s (a KernelBench problem has class Model, get_inputs "
                                    "and get_init_inputs)" % need)
        try:
            argn = [p.name for p in list(inspect.signature(ns["Model"].forward).parameters.values())[1:]
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            argn = []
        torch.manual_seed(0)
        xs = staged("inputs", ns["get_inputs"])
        if not isinstance(xs, (list, tuple)) or not all(isinstance(x, (torch.Tensor, int, float)) for x in xs):
            raise rt.Unmappable("get_inputs() must return a list of tensors and numbers (got %s)" %
                                ", ".join(sorted({type(x).__name__ for x in (xs if isinstance(xs, (list, tuple))
                                                                           else [xs])})))
        # a number among them (a scale, a dim) is a constant of the task, passed to forward as it is
        consts = [(i, argn[i] if i < len(argn) else "x%d" % i, x) for i, x in enumerate(xs)
                  if not isinstance(x, torch.Tensor)]
        if self.consts is None:
            self.consts = consts
        elif [(i, n, repr(v)) for i, n, v in consts] != [(i, n, repr(v)) for i, n, v in self.consts]:
            raise rt.Unmappable("get_inputs()'s numbers change with the module's sizes (%s, then %s): a task's "
                                "constants are fixed" % (self.consts, consts))
        ins = [(argn[i] if i < len(argn) else "x%d" % i, "activation", x.dtype, tuple(x.shape)) for i, x in enumerate(xs)
               if isinstance(x, torch.Tensor)]
        if upto == "inputs":
            return ins, None
        torch.manual_seed(0)
        model = staged("init", lambda: ns["Model"](*ns["get_init_inputs"]()))
        if meta == "small":
            model = staged("init", lambda: model.to("meta"))
            xs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in xs]
        # the mode the constructor leaves it in (KernelBench never calls eval()), or the one a run's
        # policy asks for: a size that only training refuses (BatchNorm of one value a channel) is
        # refused here too
        if self.mode != "problem":
            model.train(self.mode == "train")
        kept = []
        for k, kind, v in rt.state_entries(model):
            if kind == "buffer":  # kept at the constructor's values, never an input
                kept.append((k, v.dtype, tuple(v.shape)))
                continue
            # a manifest's names are shorter than NAME_LEN: cut, and told apart by place
            role = ("bias" if k.endswith("bias") else "weight") if kind == "parameter" else kind
            ins.append((rt.input_name(k, len(ins)), role, v.dtype, tuple(v.shape)))
        self.kept[tuple(sorted(dims.items()))] = kept
        if upto == "init":
            return ins, None
        with torch.no_grad():
            outs = rt.flat_outputs(staged("forward", lambda: model(*xs), False))
        if meta and any(o.device.type != "meta" for o in outs):
            raise Failed("forward", RuntimeError("an output left the meta device"))
        # outputs are y, y0, y1...; where an input has that name (forward(self, x, y)), out...
        taken = {t[0] for t in ins}
        stem = next(c for c in ("y", "out", "output", "result", "y_") if not any(
            n in taken for n in ([c] if len(outs) == 1 else ["%s%d" % (c, j) for j in range(len(outs))])))
        return ins, [(stem if len(outs) == 1 else "%s%d" % (stem, j), "", o.dtype, tuple(o.shape))
                     for j, o in enumerate(outs)]

    def at(self, meta, upto="forward"):
        """describe at dims, remembered: a fit and its checks ask for the same dims again."""
        def run(dims):
            key = (tuple(sorted(dims.items())), meta, upto)
            if key not in self.memo:
                try:
                    self.memo[key] = (True, self.describe(dims, meta, upto))
                except (self.rt.Unmappable, Failed) as ex:
                    self.memo[key] = (False, ex)
            ok, r = self.memo[key]
            if not ok:
                raise r
            return r
        return run

    def fit(self, at, base, names, b0):
        """Each dim of b0 (the tensors at base) as an expression in names: a literal, or affine in the
        names that move it (the step of moving each by one, which moving it by two must double, and
        moving all by two must add up). A name that moves some dim in another way is frozen: a
        literal everywhere, like a name that moves nothing. Returns the expressions and the names
        they vary in."""
        sig0, f0 = signature(b0), flat(b0)

        def moved(dims):
            try:
                b = at(dims)
            except Exception:  # noqa: BLE001 (a size the module refuses: not a dim we can vary)
                return None
            return [a - c for a, c in zip(flat(b), f0)] if signature(b) == sig0 else None

        step, way = {}, {}
        for n in names:
            # up by one and two; where the module refuses a larger size (seq_len at max_seqlen), down
            for w in (1, -1):
                if w < 0 and base[n] <= 2:
                    break
                d1 = moved(dict(base, **{n: base[n] + w}))
                if d1 is None and w > 0:
                    continue
                if d1 and any(d1):
                    d2 = moved(dict(base, **{n: base[n] + 2 * w}))
                    if d2 and d2 == [2 * x for x in d1]:
                        step[n], way[n] = [w * x for x in d1], w
                break
        act = list(step)
        while act:
            # together: a product of two names (dilation * kernel size, a flattened C*H) is not
            # affine; of the names in a dim that fails, the smallest (a kernel size, not an image's)
            # goes first, one at a time
            d2 = moved(dict(base, **{n: base[n] + 2 * way[n] for n in act}))
            bad = [n for k in range(len(f0)) for n in act
                   if step[n][k] and (d2 is None or d2[k] != 2 * sum(way[m] * step[m][k] for m in act))]
            if not bad:
                break
            drop = min(bad, key=lambda m: (base[m], -names.index(m)))
            act = [n for n in act if n != drop]
        exprs = []
        for k, v in enumerate(f0):
            terms = [(n, step[n][k]) for n in act if step[n][k]]
            exprs.append((v - sum(a * base[n] for n, a in terms), terms) if terms else v)
        return exprs, act

    def freeze(self, exprs, var, bad, base):
        """The expressions with the names in bad taken out of var (their dims literals at base)."""
        out = [e if isinstance(e, int) or not any(n in bad for n, _ in e[1]) else value(e, base) for e in exprs]
        return out, [n for n in var if n not in bad]

    def agrees(self, at, want, exprs, dims):
        """True when the tensors at dims are those of want with the dims exprs gives there."""
        try:
            got = at(dims)
        except Exception:  # noqa: BLE001
            return False
        return signature(got) == signature(want) and flat(got) == [value(e, dims) for e in exprs]

    def extrapolate(self, at, b0, exprs, var, base, limit):
        """The fit's dims shrunk until its tensors are small, where the expressions must still
        hold: a name that moves a shape by a floor (a pooling's output) looks affine, or flat,
        from one step away. Each name that fails there alone is frozen. Returns the expressions, the
        names they vary in, and the shrunk dims."""
        for _ in range(len(var) + 1):
            small, _ = self.shrink(b0, exprs, base, var, limit)
            if small == base or self.agrees(at, b0, exprs, small):
                return exprs, var, small
            bad = [n for n in var if small[n] != base[n] and
                   not self.agrees(at, b0, exprs, dict(base, **{n: small[n]}))]
            exprs, var = self.freeze(exprs, var, bad or [n for n in var if small[n] != base[n]], base)
        return exprs, var, base

    def shrink(self, d, exprs, base, var, limit):
        """base with the dims in var halved, the largest first, until the tensors of d (whose dims
        exprs gives) hold at most limit elements, no dim under one."""
        ranks = [len(t[3]) for t in d[0] + (d[1] or [])]

        def total(dims):
            vals = [value(e, dims) for e in exprs]
            if vals and min(vals) < 1:
                return None
            k, t = 0, 0
            for r in ranks:
                t, k = t + prod(vals[k:k + r]), k + r
            return t

        return halve(base, var, total, limit)

    def shrink_more(self, at, small, names, limit):
        """small with other names halved too (those no expression follows: a frozen spatial size),
        the largest first, while the tensors on meta at the result hold more than limit elements."""
        def total(dims):
            try:
                ts = at(dims)[0] + at(dims)[1]
            except Exception:  # noqa: BLE001 (a size the module refuses)
                return None
            return None if any(s < 1 for t in ts for s in t[3]) else sum(prod(t[3]) for t in ts)

        return halve(small, names, total, limit)

    def mismatch(self, want, got):
        """Where the tensors got (a real run) differ from want (meta at the same dims), else None."""
        if signature(got) != signature(want):
            return "tensors %s, on meta %s" % ([t[:3] for t in got[0] + got[1]], [t[:3] for t in want[0] + want[1]])
        for g, w in zip(got[0] + got[1], want[0] + want[1]):
            if g[3] != w[3]:
                return "'%s' is %s, on meta %s" % (g[0], list(g[3]), list(w[3]))
        return None

    def on_meta(self, base, names, b0):
        """The meta path: fit on meta, checked on meta far from base, then one small real forward must
        agree with meta. Returns ((exprs, var), how), or (None, why) when the real forward disagreed."""
        meta = self.at(self.kind)
        exprs, var = self.fit(meta, base, names, b0)
        exprs, var, small = self.extrapolate(meta, b0, exprs, var, base, LIMIT)
        # then the names no expression follows and the sizes in top-level lists, while meta says the
        # check would be big
        small, full = dict(small, **self.elements), dict(base, **self.elements)
        dims, _ = self.shrink_more(meta, small, [m for m in names if m not in var] + list(self.elements), LIMIT)
        tries = [dims] + ([small] if small != dims else [])
        last = None
        for dims in tries:
            n = self.elements_at(meta, dims)
            if n is None or n > CAP:
                last = last or "at the smallest sizes the module allows (%s) its tensors hold %s elements" % (
                    dims_text(dims, full), n)
                continue
            try:
                got = self.describe(dims, False)
            except Failed as ex:
                # a constraint the shrinking broke, perhaps: then with only the dims the expressions follow
                last = "%s at %s failed: %s" % (STAGES[ex.stage], dims_text(dims, full), ex)
                continue
            bad = self.mismatch(meta(dims), got)
            if bad:
                return None, "a CPU forward at %s disagreed with the meta one (%s)" % (dims_text(dims, full), bad)
            return (exprs, var), "shapes from the meta device at the module's size, checked by a CPU forward at " \
                "%s (%d elements)" % (dims_text(dims, full), n)
        raise self.rt.Unmappable("no small real forward to check the meta shapes against: %s" % last)

    def elements_at(self, at, dims):
        try:
            d = at(dims)
        except Exception:  # noqa: BLE001
            return None
        return sum(prod(t[3]) for t in d[0] + d[1])

    def ranges(self, at, dims, vary, named):
        """The random shapes' ranges ({name: [lo, hi]}, hi - lo >= 31) for the names in vary, around
        dims, where the Model runs: each range's ends and a few sizes near them and near dims are
        tried (at: the meta forward). Refused only above a size that another name sets (seq_len <=
        max_seqlen), that name, where --dims named it, is drawn from above the range, else the
        range is cut there; refused only below a size, the range starts there; refused between sizes
        it runs (n_embd % n_head), the name is not varied. Returns the ranges and a note per change."""
        def runs(d):
            try:
                at(d)
                return True
            except Exception:  # noqa: BLE001 (the Model refuses the size, or torch does)
                return False

        def edge(good, bad, n, d):
            """The last size of n that runs between good (runs) and bad (refused)."""
            while abs(bad - good) > 1:
                mid = (good + bad) // 2
                if runs(dict(d, **{n: mid})):
                    good = mid
                else:
                    bad = mid
            return good

        rng = {n: [max(1, dims[n] // 2), max(1, dims[n] // 2) + max(32, dims[n])] for n in vary}
        notes = []
        if not vary or not runs(dims):
            return rng, notes
        for n in list(vary):
            lo, hi = rng[n]
            probe = sorted({v for v in (lo, lo + 1, lo + 2, lo + 3, (lo + hi) // 2, dims[n] + 1, dims[n] + 2,
                                        dims[n] + 3, hi - 2, hi - 1, hi) if lo <= v <= hi})
            bad = [v for v in probe if not runs(dict(dims, **{n: v}))]
            if not bad:
                continue
            good = [v for v in probe if v not in bad] + [dims[n]]
            if min(bad) > max(good):
                top = edge(max(good), min(bad), n, dims)
                # a bound another name sets: moved with it, the bound moves too
                by = [m for m in dims if m != n and dims[m] == top and
                      runs(dict(dims, **{m: top + 5, n: top + 5})) and not runs(dict(dims, **{m: top + 5, n: top + 6}))]
                if by and by[0] in named and runs(dict(dims, **{by[0]: hi, n: hi})):
                    m = by[0]
                    rng[m] = [hi, hi + max(32, dims[m])]
                    if m not in vary:
                        vary.append(m)
                    notes.append("%s <= %s (the Model refuses %s=%d at %s=%d): %s drawn from [%d, %d]" % (
                        n, m, n, top + 1, m, top, m, hi, rng[m][1]))
                elif top - 31 >= 1 or (top >= lo + 31):
                    rng[n] = [min(lo, top - 31), top]
                    notes.append("%s <= %d (the Model refuses %s=%d%s): drawn from [%d, %d]" % (
                        n, top, n, top + 1, " at %s=%d" % (by[0], top) if by else "", rng[n][0], top))
                else:
                    del rng[n]
                    vary.remove(n)
                    notes.append("%s not varied: the Model refuses %s=%d%s" % (
                        n, n, top + 1, " at %s=%d" % (by[0], top) if by else ""))
            elif max(bad) < min(good):
                low = edge(min(good), max(bad), n, dims)
                top = max(hi, low + 31)
                if runs(dict(dims, **{n: top})):
                    rng[n] = [low, top]
                    notes.append("%s >= %d (the Model refuses %s=%d): drawn from [%d, %d]" % (n, low, n, low - 1, low, top))
                else:
                    del rng[n]
                    vary.remove(n)
                    notes.append("%s not varied: the Model refuses %s=%d and %s=%d" % (n, n, low - 1, n, top))
            else:
                del rng[n]
                vary.remove(n)
                notes.append("%s not varied: the Model refuses %s=%d, between sizes it runs" % (n, n, bad[0]))
        return rng, notes

    def on_cpu(self, base, names, why):
        """The fallback: the inputs (and the Model's parameters where it builds on meta) on meta at
        the module's size choose the dims to shrink; every shape is then fitted from small CPU runs,
        checked far from there, and the inputs' fit must agree with meta at the module's size."""
        upto = "init" if why.stage == "forward" else "inputs"
        meta, cpu = self.at(self.kind, upto), self.at(False)
        bi = meta(base)
        if len(bi[0]) > self.rt.MAX_TENSORS:
            mappable(self.rt, bi[0], [])
        ei, vi = self.fit(meta, base, names, bi)
        # the inputs small, and smaller while a forward there is slow (what the Model makes of its
        # inputs, a transposed convolution's upsampling, meta cannot tell here)
        for lim in (LIMIT // 16, LIMIT // 256, LIMIT // 4096):
            small, _ = self.shrink(bi, ei, base, vi, lim)
            t0 = time.monotonic()
            b0 = cpu(small)
            if time.monotonic() - t0 < 0.1:
                break
        exprs, var = self.fit(cpu, small, names, b0)
        # far from small (each name it varies doubled), the fit must hold; a name that fails there,
        # or that moves nothing near small, goes back to its size
        far = dict(small, **{n: 2 * small[n] + 1 for n in var})
        bad = [] if far == small or self.agrees(cpu, b0, exprs, far) else \
            [n for n in var if not self.agrees(cpu, b0, exprs, dict(small, **{n: far[n]}))]
        exprs, var = self.freeze(exprs, var, bad, small)
        back = {n: base[n] for n in small if small[n] != base[n] and n not in var}
        mid = small
        if back:
            # one forward with those at their size, the names the fit varies shrunk as the inputs
            # allow: the literal dims from there, the affine ones taking their constant from there
            mid = dict(self.shrink(bi, ei, base, [n for n in vi if n in var], LIMIT)[0], **back)
            b1 = cpu(mid)
            if signature(b1) != signature(b0):
                raise self.rt.Unmappable("the Model's tensors change with its size (%s)" % why)
            exprs = [v if isinstance(e, int) else (v - sum(a * mid[n] for n, a in e[1]), e[1])
                     for e, v in zip(exprs, flat(b1))]
        k = len(flat(bi))
        if [value(e, base) for e in exprs[:k]] != flat(bi):
            raise self.rt.Unmappable("the shapes fitted from CPU forwards at %s disagree with the module's inputs "
                                     "(%s, from the meta device)" % (dims_text(small, base), flat(bi)))
        return b0, exprs, var, "%s does not run on the meta device here (%s): shapes fitted from CPU forwards at " \
            "%s%s" % (STAGES[why.stage], why, dims_text(small, base), "" if mid == small else
                      " and one at " + dims_text(mid, base))


def dims_text(small, base):
    moved = ["%s=%d" % (n, v) for n, v in small.items() if v != base[n]]
    return ", ".join(moved) if moved else "the module's size"


def derive(rt, src, name, dims_arg):
    """The manifest text of the module src, named name, at its dims with dims_arg ("N=64,D=128")."""
    import torch

    torch.set_default_dtype(torch.float32)
    mdims = rt.module_dims(ast.parse(src))
    consts = {n: v for n, (v, _) in mdims.items()}
    dims = dict(consts)
    named = []
    for kv in filter(None, (dims_arg or "").split(",")):
        k, _, v = kv.partition("=")
        k = k.strip()
        if k not in consts:
            raise rt.Unmappable("--dims names %s, which the module does not assign as a top-level integer (it "
                                "assigns %s)" % (k, ", ".join(consts) or "none"))
        dims[k] = int(v)
        named.append(k)
    # the names a shape may follow: those the module sets itself, and any the user set (a name
    # derived from another, `groups = in_channels`, follows it)
    # (a manifest's dims are at least one, named in under 32 characters)
    names = [n for n in consts if (not mdims[n][1] or n in named) and dims[n] >= 1 and len(n) < NAME_LEN]
    # what the module is rebuilt with: those names and any --dims set; a derived name not set follows
    dims = {n: dims[n] for n in consts if n in names or n in named}
    dv = Deriver(rt, src, name)
    b0 = why = None
    try:
        b0 = dv.describe(dims, True)
    except Failed as ex:
        why = ex
    if why is not None and why.stage == "init":
        # a constructor that reads a value (`torch.linspace(0, rate, n).item()`): its small tensors real
        try:
            b0, why, dv.kind = dv.describe(dims, "small"), None, "small"
        except Failed as ex:
            if ex.stage == "forward":
                why, dv.kind = ex, "small"
    if why is not None and why.stage in ("module", "inputs"):
        raise why  # nothing of it runs on meta, and these stages need no meta kernel: its own failure
    if b0 is not None:
        mappable(rt, b0[0], b0[1])
        fitted, how = dv.on_meta(dims, names, b0)
        if fitted is not None:
            exprs, var = fitted
        else:
            why = Failed("forward", RuntimeError(how))
    # the random shapes' ranges probed where the Model runs on meta (a forward on the CPU at the
    # ranges' ends would cost what the check's shrinking saved: there a refused shape is dropped
    # when the run meets it)
    ranger = (lambda d, v: dv.ranges(dv.at(dv.kind), d, v, named)) if why is None else None
    if why is not None:
        b0, exprs, var, how = dv.on_cpu(dims, names, why)
        mappable(rt, b0[0], b0[1])
    for at, cname, v in dv.consts or []:
        if type(v) is float and v != v or v in (float("inf"), float("-inf")):
            raise rt.Unmappable("get_inputs() gives %s = %r, which a manifest's constant does not hold" % (cname, v))
    kept = dv.kept.get(tuple(sorted(dims.items())))
    if kept is None:  # the fit ran elsewhere: the Model's kept buffers at the module's size, on meta
        try:
            dv.describe(dims, dv.kind, "init")
        except Exception:  # noqa: BLE001 (named by shape only where they can be had)
            pass
        kept = dv.kept.get(tuple(sorted(dims.items())), [])
    return manifest(rt, name, consts, dims, named, b0[0], b0[1], exprs, var, how, dv.consts or [], kept, ranger)


def mappable(rt, ins, outs):
    kg, _, _ = rt.dtype_tables()
    if len(ins) > rt.MAX_TENSORS or len(outs) > rt.MAX_TENSORS:
        raise rt.Unmappable("%d inputs (with the Model's parameters and buffers) and %d outputs; a manifest "
                            "declares at most %d of each" % (len(ins), len(outs), rt.MAX_TENSORS))
    for t in ins + outs:
        if t[2] not in kg:
            raise rt.Unmappable("tensor '%s' has dtype %s, which kgate does not map" % (t[0], t[2]))
        if len(t[3]) > 8:  # 0: a scalar (a loss, a 0-dim input)
            raise rt.Unmappable("tensor '%s' has %d dimensions; kgate maps 0 to 8" % (t[0], len(t[3])))
    names = [t[0] for t in ins + outs]
    if any(len(n) >= NAME_LEN for n in names):
        raise rt.Unmappable("tensor '%s' has a name of %d characters; a manifest's are under %d" % (
            max(names, key=len), len(max(names, key=len)), NAME_LEN))
    if len(set(names)) != len(names):
        raise rt.Unmappable("two tensors are named alike: %s" % ", ".join(names))


def fits(exprs, ranks, dims, named):
    """The expressions within what a manifest holds (verifier/plan/task.h): each dim's and each output's
    reduction under EXPR_LEN characters, at most MAX_SYMS names. Where not, the least of the names no
    one set by --dims (the smallest value first) becomes a literal."""
    while True:
        used = sorted({n for e in exprs if not isinstance(e, int) for n, _ in e[1]}, key=lambda n: (n in named, dims[n]))
        k, long = 0, False
        for r in ranks:
            ds = [render(e) for e in exprs[k:k + r]]
            k += r
            long = long or any(len(d) >= EXPR_LEN for d in ds) or len(reduction(ds)) >= EXPR_LEN
        if not long and len(used) + len([n for n in named if n not in used]) <= MAX_SYMS:
            return exprs
        if not used or used[0] in named:
            raise Unfit()
        exprs = [e if isinstance(e, int) or not any(n == used[0] for n, _ in e[1]) else value(e, dims) for e in exprs]


class Unfit(Exception):
    pass


def reduction(shape):
    """What an output element may reduce over, at most: every dim but the first (a row of softmax, a
    sample of LayerNorm, a matmul row); the tolerance's growth term follows it."""
    return "*".join([d if d.replace("_", "").isalnum() else "(%s)" % d for d in shape[1:]] or ["1"])


def manifest(rt, name, mconsts, dims, named, ins, outs, exprs, var, how, consts=(), kept=(), ranger=None):
    import torch

    kg, _, dnames = rt.dtype_tables()
    try:
        exprs = fits(exprs, [len(t[3]) for t in ins + outs], dims, named)
    except Unfit:
        raise rt.Unmappable("the shapes' expressions in the dims --dims names are longer than a manifest "
                            "holds (%d characters, %d dims)" % (EXPR_LEN - 1, MAX_SYMS)) from None
    sexprs = [render(e) for e in exprs]
    used = {n for e in exprs if not isinstance(e, int) for n, _ in e[1]}
    var = [n for n in var if n in used]
    # the task's dims: the names its shapes are written in, and every one --dims set (the runner
    # rebuilds the module from the dims of each shape)
    declared = [n for n in mconsts if n in named or n in used]
    lines = ["# Derived by kgate from a KernelBench-format module: inputs from get_inputs(), then the",
             "# Model's parameters and running statistics in state_dict order, outputs from its forward; how:",
             "# %s" % how]
    if kept:
        # buffers are not inputs: both sides get the values the Model's constructor gives them
        lines.append("# kept (the constructor's values, never drawn): %s" % ", ".join(
            "%s %s" % (k, list(shape)) for k, _, shape in kept))
    vary = [n for n in var if n in named and n in used]
    ranges, notes = ranger(dims, vary) if ranger and vary else (
        {n: [max(1, dims[n] // 2), max(1, dims[n] // 2) + max(32, dims[n])] for n in vary}, [])
    for note in notes:
        lines.append("# random shapes: %s" % note)
    declared += [n for n in ranges if n not in declared]
    lines += [
             "kgate_task: 1", "name: %s" % name,
             "description: %s (PyTorch Model, the trusted reference)" % name]
    # (none where every size is a literal: `dims: []`)
    lines.append("dims: [%s]" % ", ".join(declared))
    lines.append("shapes:")
    shape = ", ".join("%s: %d" % (n, dims[n]) for n in declared)
    # the module's shape (after --dims) is the base under every policy's shape set
    lines.append("  nominal: {%s}" % shape)
    lines.append("  ci: {%s}" % shape)
    if declared:
        if ranges:
            # secret random shapes along the dims the user named, around the values given, where
            # the Model runs
            lines.append("random_shapes:")
            lines.append("  count: 2")
            lines.append("  ranges: {%s}" % ", ".join("%s: [%d, %d]" % (n, lo, hi) for n, (lo, hi) in ranges.items()))
    k = 0

    # a scalar output (a loss) reduces over its inputs: the largest activation's elements, whose
    # rounding its tolerance's growth term follows
    at, widest, most = 0, None, 0
    for t in ins:
        if t[1] == "activation" and t[3] and prod(t[3]) > most:
            widest, most = sexprs[at:at + len(t[3])], prod(t[3])
        at += len(t[3])

    def spec(t, out):
        nonlocal k
        shape = sexprs[k:k + len(t[3])]
        k += len(t[3])
        s = "  - {name: %s, dtype: %s, shape: [%s]" % (t[0], dnames[kg[t[2]]], ", ".join(shape))
        if not out and t[1] != "activation":
            s += ", role: %s" % t[1]
        if out:
            red = reduction(shape) if shape or not widest else reduction(["1"] + widest)
            s += ", reduction: %s" % (red if len(red) < EXPR_LEN else reduction(shape))
        return s + "}"

    lines.append("inputs:")
    lines += [spec(t, False) for t in ins]
    lines.append("outputs:")
    lines += [spec(t, True) for t in outs]
    if consts:
        # the forward's numbers from get_inputs(): passed to it as they are, on both sides
        lines.append("constants:")
        for at, cname, v in consts:
            kind = "bool" if type(v) is bool else "int" if type(v) is int else "float"
            lines.append("  - {name: %s, at: %d, type: %s, value: %s}" % (
                cname, at, kind, ("true" if v else "false") if kind == "bool" else repr(v)))
    lines.append("tolerance: {atol: 1.0e-5, rtol: 1.0e-4, rms: 1.0e-4}")
    lines.append("reference:")
    lines.append("  torch: %s.py" % name)
    lines.append("# order: %s" % ", ".join(t[0] for t in ins))
    lines.append("# torch %s%s" % (torch.__version__, "" if hasattr(torch, "compile") else " (no torch.compile)"))
    return "\n".join(lines) + "\n"


def not_here(ex):
    """Why a module that fails for want of something this Python lacks is not kgate's to map, in
    words: a package it imports (einops: not packaged by Debian, whose python3-torch kgate runs) or
    an op of a later torch; None for any other failure."""
    import torch

    cause = getattr(ex, "cause", None)
    if isinstance(cause, ModuleNotFoundError) and cause.name:
        top = cause.name.split(".")[0]
        why = "Debian does not package it" if top == "einops" else "it is not installed here"
        return ("the module imports %s, which this Python lacks: %s (kgate runs Debian's python3-torch, torch %s); "
                "not a limit of kgate's mapping" % (top, why, torch.__version__))
    words = str(cause) if isinstance(cause, AttributeError) else ""
    if words.startswith("module 'torch") and "has no attribute" in words:
        mod = words.split("'")[1]
        attr = words.rsplit("'", 2)[-2]
        return ("%s.%s is not in torch %s here (Debian's python3-torch; it came in a later torch): the Model "
                "cannot run on it; not a limit of kgate's mapping" % (mod, attr, torch.__version__))
    return None
def parse_dims(text):
    return {k: int(v) for k, _, v in (kv.partition("=") for kv in text.split()) if k}


def refused(dv, dims):
    """(why the Model refuses the shape dims, or None; the forward's tensors from get_inputs() as
    describe gives them, or None): its module, its constructor or its forward raises on the meta
    device, and where meta refuses it (an op without a meta kernel), on the CPU where its inputs are
    small (else the run finds out)."""
    def told(ex):
        return "%s: %s" % (STAGES[ex.stage], ex) if isinstance(ex, Failed) else "%s: %s" % (type(ex).__name__, ex)

    def xs(ins):
        return [t for t in ins if t[1] == "activation"]

    last = None
    for meta in (True, "small") if dv.kind is True else ("small",):
        try:
            ins, _ = dv.describe(dims, meta)
            return None, xs(ins)
        except Failed as ex:
            last = ex
        except Exception as ex:  # noqa: BLE001
            return told(ex), None
        if last.stage in ("module", "inputs"):
            return told(last), None
    try:
        ins, _ = dv.describe(dims, True, "inputs")
        if sum(prod(t[3]) for t in ins) > CAP:
            return None, xs(ins)
        dv.describe(dims, False)
        return None, xs(ins)
    except Exception as ex:  # noqa: BLE001
        return told(ex), None


def state(rt, src, name, spec):
    """The state file of one run (torch_runner.read_state reads it; verifier/plan/torchtask.c the text
    lines before "json"): for each of the run's shapes (spec's "shape" lines), the Model built for
    real as the problem builds it (seed 0, get_init_inputs()), its constructor's arguments as data,
    which of its entries are the task's inputs (spec's "input NAME ROLE" lines, the manifest's: the
    parameters and running statistics, drawn per trial) and the values of the others (its kept
    buffers), and whether it runs at that shape at all; the mode it runs in (spec's "mode":
    problem, the constructor's; train; eval)."""
    import hashlib

    import torch

    torch.set_default_dtype(torch.float32)
    mode, inputs, shapes = "problem", [], []
    for line in spec.splitlines():
        word, _, rest = line.partition(" ")
        if word == "mode":
            mode = rest.strip()
        elif word == "input":
            n, _, role = rest.partition(" ")
            inputs.append((n, role.strip()))
        elif word == "shape":
            shapes.append(rest.strip())
    if mode not in ("problem", "train", "eval"):
        raise rt.Unmappable("mode %r: expected problem, train or eval" % mode)
    dv = Deriver(rt, src, name)
    dv.mode = mode
    n_x = 0
    while n_x < len(inputs) and inputs[n_x][1] == "activation":
        n_x += 1
    raw, seen, recs, text, training = bytearray(), {}, {}, [], None
    for k, shape in enumerate(shapes):
        dims = parse_dims(shape)
        rec = {"ok": False, "n_x": n_x}
        try:
            code = dv.code(dims)
            ns = {"__name__": "kgate_problem"}
            step = "module"
            exec(code, ns)
            for need in ("Model", "get_init_inputs"):
                if need not in ns:
                    raise rt.Unmappable("the module defines no %s" % need)
            step = "init"
            init = ns["get_init_inputs"]()
            rec["init"] = rt.encode(init, raw)
            torch.manual_seed(0)
            model = ns["Model"](*init)
            if mode != "problem":
                model.train(mode == "train")
            if training is None:
                training = model.training
            step = None
            free = list(range(n_x, len(inputs)))
            ents = []
            for ename, kind, t in rt.state_entries(model):
                flat = ename.replace(".", "_")
                at = next((i for i in free if inputs[i][0] == flat or (len(flat) >= NAME_LEN and
                                                                       inputs[i][0].startswith(flat[:NAME_LEN - 5] + "_"))), None)
                e = {"name": ename, "kind": kind, "dtype": str(t.dtype).split(".")[-1], "shape": list(t.shape),
                     "input": at}
                if at is None:  # its constructor's values, the same for both sides
                    b = rt.tensor_bytes(t)
                    h = (e["dtype"], tuple(t.shape), hashlib.sha256(b).hexdigest())
                    if h not in seen:
                        seen[h] = len(raw)
                        raw += b
                    e["off"], e["nbytes"] = seen[h], len(b)
                else:
                    free.remove(at)
                ents.append(e)
            del model
            rec["entries"] = ents
            if free:
                raise rt.Unmappable("the task's inputs %s are none of the Model's entries (%s)" % (
                    ", ".join(inputs[i][0] for i in free), ", ".join(e["name"] for e in ents)))
            rec["why"], xs = refused(dv, dims)
            rec["ok"] = rec["why"] is None
            if xs is not None:
                # what a JIT candidate's warm-up calls its forward with (torch_device.warmup): the
                # forward's tensors' dtypes and shapes (its values its own), get_inputs()'s numbers
                rec["xs"] = [{"dtype": str(t[2]).split(".")[-1], "shape": list(t[3])} for t in xs]
                rec["consts"] = [[at, rt.encode(v, raw)] for at, _, v in dv.consts or []]
        except rt.Unmappable as ex:
            rec["why"] = str(ex)
        except Exception as ex:  # noqa: BLE001 (the Model's own refusal of this shape, named)
            rec["why"] = "%s%s: %s" % (STAGES[step] + ": " if step else "", type(ex).__name__, ex)
        if rec["ok"]:
            text.append("shape %d ok" % k)
        if not rec["ok"]:
            text.append("shape %d refused %s" % (k, " ".join(rec["why"].split())[:300]))
        recs[rt.dims_key(dims)] = rec
        if k == 0 and "entries" in rec:
            for e in rec["entries"]:
                text.append("entry %s %s %s %s %s" % (e["name"], "kept" if e["input"] is None else "drawn", e["kind"],
                                                      e["dtype"], "x".join(str(d) for d in e["shape"]) or "scalar"))
    resolved = mode if mode != "problem" else ("train" if training or training is None else "eval")
    head = json.dumps({"mode": mode, "shapes": recs}).encode()
    lines = ["kgate-state 1", "mode %s %s" % (resolved, "problem" if mode == "problem" else "policy")] + text + \
        ["json %d" % len(head)]
    return ("\n".join(lines) + "\n").encode() + head + bytes(raw)


def derive_text(rt, src, name, dims_arg):
    """(True, manifest) or (False, why): every failure of the module named, never raised."""
    try:
        return True, derive(rt, src, name, dims_arg)
    except rt.Unmappable as ex:
        return False, str(ex)
    except Failed as ex:
        return False, not_here(ex) or "running the module failed (%s): %s" % (STAGES[ex.stage], ex)
    except Exception as ex:  # noqa: BLE001 (a module that fails in a way not staged: its error, named)
        return False, "running the module failed: %s: %s" % (type(ex).__name__, ex)


def state_data(rt, body, name):
    """(True, the state file) or (False, why): a state job's body is its spec's lines, a line
    "source", then the module."""
    head, sep, src = body.partition(b"\nsource\n")
    if not sep:
        return False, b"a state job without its module"
    try:
        return True, state(rt, src.decode("utf-8", "replace"), name, head.decode("utf-8", "replace"))
    except rt.Unmappable as ex:
        return False, str(ex).encode()
    except Exception as ex:  # noqa: BLE001
        return False, ("building the run's state failed: %s: %s" % (type(ex).__name__, ex)).encode()


def _write(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _read(fd, n, buf):
    """n bytes from fd, buf holding what was read ahead; (bytes, rest) or (None, _) at EOF."""
    while len(buf) < n:
        more = os.read(fd, max(65536, n - len(buf)))
        if not more:
            return None, buf
        buf += more
    return buf[:n], buf[n:]


def serve(rt, fd):
    """Derives one module after another, as verifier/plan/torchderive.c hands them over fd: it sends
    "job NAME DIMS LEN\\n" and the module's LEN bytes (DIMS "-" for none), and reads back
    "ok LEN\\n" and the manifest or "fail LEN\\n" and why; or "state NAME - LEN\\n" and a state
    job's body (state_data), and reads back the state file. "ready" first, once torch is imported;
    EOF ends it."""
    import torch

    torch.set_num_threads(1)
    _write(fd, ("ready torch %s\n" % torch.__version__).encode())
    buf = b""
    while True:
        while b"\n" not in buf:
            more = os.read(fd, 65536)
            if not more:
                return 0
            buf += more
        line, buf = buf.split(b"\n", 1)
        parts = line.decode().split(" ")
        if len(parts) != 4 or parts[0] not in ("job", "state"):
            return 2
        src, buf = _read(fd, int(parts[3]), buf)
        if src is None:
            return 2
        # where this module's words begin in the process's output (kgate quotes them if it dies)
        sys.stdout.write("\n%s%s ---\n" % (MARK, parts[1]))
        sys.stdout.flush()
        if parts[0] == "state":
            ok, data = state_data(rt, src, parts[1])
        else:
            ok, text = derive_text(rt, src.decode("utf-8", "replace"), parts[1], "" if parts[2] == "-" else parts[2])
            data = text.encode()
        _write(fd, b"%s %d\n" % (b"ok" if ok else b"fail", len(data)) + data)


def main(argv, rt=None):
    """--derive FILE [--name NAME] [--dims N=V,...]: the manifest between markers on stdout (a
    person's use); --derive-serve: the jobs kgate hands over fd 3."""
    warnings.simplefilter("ignore")
    if rt is None:
        import importlib.util

        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_runner.py")
        spec = importlib.util.spec_from_file_location("kgate_torch_runner", here)
        rt = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rt)
    if len(argv) > 1 and argv[1] == "--derive-serve":
        return serve(rt, 3)
    if len(argv) > 4 and argv[1] == "--state":
        # --state MODULE SPEC OUT: a state job's file, for a person (kgate runs it as a job)
        with open(argv[2], "rb") as f, open(argv[3], "rb") as g:
            ok, data = state_data(rt, g.read() + b"\nsource\n" + f.read(), "problem")
        with open(argv[4], "wb") as out:
            out.write(data)
        return 0 if ok else 2
    if len(argv) > 2 and argv[1] == "--derive":
        dims = argv[argv.index("--dims") + 1] if "--dims" in argv else ""
        name = argv[argv.index("--name") + 1] if "--name" in argv else \
            os.path.basename(argv[2]).rsplit(".", 1)[0] or "problem"
        with open(argv[2]) as f:
            ok, text = derive_text(rt, f.read(), name, dims)
        sys.stdout.write(BEGIN + "\n" + text + END + "\n" if ok else "%s%s\n" % (FAIL, text))
        return 0 if ok else 2
    sys.stderr.write("usage: torch_derive.py --derive FILE [--name NAME] [--dims N=V,...] | --derive-serve\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
