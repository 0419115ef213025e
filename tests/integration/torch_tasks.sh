#!/bin/sh
# Integration: KernelBench-format PyTorch modules as tasks (tests/data/kernelbench, written for
# kgate), their Model the trusted reference in the torch runner's sandbox. Honest C candidates are
# accepted at small --dims, zero and constant ones rejected, an honest one written for the wrong
# weight order rejected with the expected order named; eager PyTorch is a timed baseline beside
# kgate's reference and torch.compile said unavailable where the installed torch lacks it; task import writes manifests:
# the module's sizes as KernelBench writes them (a chain, expressions, a name given another name),
# a directory's modules through a batch of sandboxed derivations without building any model at its
# size (softmax at 4096 x 393216), a forward without meta kernels fitted from small real runs, a
# module that hangs named at its time bound while the others import, and a killed import leaves
# no process behind. Skipped where no Python with torch is found (scripts/deps.sh installs
# Debian's python3-torch).
set -u
. tests/integration/lib.sh
need_torch
LN="--dims batch_size=2,features=4,dim1=8,dim2=8"
# conv2d_relu_bias.py writes height = width = 32: each name of the chain set on its own
CV="--dims batch_size=2,in_channels=3,out_channels=4,height=10,width=12"
# correctness only (timing of calls this small is noise on a shared 2-core machine)
Q="--policy ci --iterations 0"
expect 0 - $D/softmax.py examples/softmax/online.c $SM $Q
expect 1 check.mismatch $D/softmax.py $C/softmax_zero.c $SM $Q
expect 1 check.constant_output $D/softmax.py $C/softmax_const.c $SM $Q
expect 0 - $D/layernorm.py $C/layernorm.c $LN $Q
expect 0 - $D/conv2d_relu_bias.py $C/conv.c $CV $Q
# reads past a small input (the weights taken in the wrong order): a fault, named from the wait status
expect 1 sandbox.crash $D/conv2d_relu_bias.py $C/conv_wrong_order.c $CV $Q

# the wrong weight order: the rejection names the order kg_forward gets
"$KGATE" verify $D/conv2d_relu_bias.py $C/conv_wrong_order.c $CV $Q >"$tmp/order.out" 2>&1
ok "wrong weight order: the summary names the expected order" grep -q \
	"in this order.*: x \[batch_size,in_channels,height,width\], bias \[out_channels,1,1\], conv_weight \[out_channels,in_channels,kernel_size,kernel_size\], conv_bias \[out_channels\]" "$tmp/order.out"

# timed: eager PyTorch is a baseline timed in the same run beside kgate's reference (here the same
# Model in kgate's runner), torch.compile unavailable on torch 1.13
"$KGATE" verify $D/matmul.py $C/matmul.c --dims N=64 --policy ci --report json:"$tmp/mm.json" >"$tmp/mm.out" 2>&1
rc=$?
ok "matmul N=64: accepted or, on a loaded host, only timing noise (exit $rc)" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
codes = [r["code"] for r in d["reasons"]]
assert d["exit_code"] == 0 or set(codes) <= {"timing.tampered"}, codes
b = {x["name"]: x for x in d["baselines"]}
assert set(b) == {"reference", "eager", "compile"}, b
if d["exit_code"] == 0:
    assert b["eager"]["timed"] and b["eager"]["median_ms"] > 0 and d["best_baseline"] == "eager", b
    assert b["reference"]["timed"] and b["eager"]["n"] == d["timing"]["candidate"]["n"], b
    assert "eager, the module\x27s Model, on the host" in b["eager"]["how"], b["eager"]
import subprocess
v = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(hasattr(torch, \"compile\"))"], capture_output=True, text=True).stdout.strip()
if v == "False":
    assert b["compile"]["status"].startswith("unavailable"), b["compile"]' "$tmp/mm.json"

# --dims follows derived constants (bias_shape = (out_channels, 1, 1)) and names what is unknown
"$KGATE" task import $D/conv2d_relu_bias.py --out "$tmp/imp" $CV >"$tmp/imp.out" 2>&1
ok "task import writes a manifest and the module" test -f "$tmp/imp/task.yaml" -a -f "$tmp/imp/conv2d_relu_bias.py"
ok "imported manifest: derived shapes follow the constants" grep -q \
	"name: y, dtype: f32, shape: \[batch_size, out_channels, height - kernel_size + 1, width - kernel_size + 1\]" "$tmp/imp/task.yaml"
ok "imported manifest validates" "$KGATE" validate "$tmp/imp/task.yaml"
expect 0 - "$tmp/imp/task.yaml" $C/conv.c $Q
"$KGATE" verify $D/softmax.py examples/softmax/online.c --dims nosuch=3 $Q >"$tmp/bad.out" 2>&1
rc=$?
ok "an unknown --dims name is exit 2 (got $rc)" [ $rc -eq 2 ]
ok "  and says which" grep -q "nosuch" "$tmp/bad.out"

# a module kgate cannot map: exit 2 with the reason, never a crash
mkdir -p "$tmp/lvl"
cp $D/softmax.py "$tmp/lvl/"
# (a scalar output maps since a loss's did: torch_mapping.sh; a dict of outputs does not)
cat >"$tmp/lvl/dict_out.py" <<'PY'
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return {"sum": x.sum(1)}
def get_inputs():
    return [torch.randn(8, 8)]
def get_init_inputs():
    return []
PY
"$KGATE" verify "$tmp/lvl/dict_out.py" examples/softmax/online.c $Q >"$tmp/dict.out" 2>&1
rc=$?
ok "a dict output is exit 2 (got $rc)" [ $rc -eq 2 ]
ok "  and says why" grep -q "forward returns dict; kgate maps a tensor, a number or a tuple of them" "$tmp/dict.out"
"$KGATE" task import --kernelbench "$tmp/lvl" --out "$tmp/lvlout" --dims batch_size=4 >"$tmp/lvl.out" 2>&1
rc=$?
ok "a level with one unmappable problem: exit 1 (got $rc), the other imported" sh -c \
	'[ $0 -eq 1 ] && grep -q "imported  softmax.py" "$1" && grep -q "skipped   dict_out.py" "$1" && test -f "$2/softmax/task.yaml"' \
	$rc "$tmp/lvl.out" "$tmp/lvlout"

# a level as KernelBench writes it, in one batch: expressions (M = 1024 * 2), groups = in_channels,
# softmax at 4096 x 393216 (6 GiB a tensor: built for real it would take minutes and more memory
# than the sandbox allows), a forward that reads a value (.item(): no meta kernel in any torch, its
# shapes from small CPU runs), and a module that hangs (named at its bound, the others import)
mkdir -p "$tmp/kb"
cp $D/matmul_expr.py $D/depthwise.py $D/softmax_big.py $D/scale_by_max.py "$tmp/kb/"
printf 'import time\ntime.sleep(600)\n' | cat - $D/softmax.py >"$tmp/kb/hang.py"
"$KGATE" task import --kernelbench "$tmp/kb" --out "$tmp/kbout" --timeout 3 >"$tmp/kb.out" 2>&1
rc=$?
sed 's/^/     | /' "$tmp/kb.out"
ok "batch: exit 1 (got $rc), the hanging module named at its bound, the other four imported" sh -c \
	'[ $0 -eq 1 ] && grep -q "skipped   hang.py: deriving the task took over 3 s" "$1" && grep -q "^4 imported, 1 not mapped" "$1"' \
	$rc "$tmp/kb.out"
ok "batch: expressions become dims" grep -q \
	"nominal: {M: 2048, K: 8192, N: 4096}" "$tmp/kbout/matmul_expr/task.yaml"
ok "  and shapes follow them" grep -q "name: A, dtype: f32, shape: \[K, M\]" "$tmp/kbout/matmul_expr/task.yaml"
ok "batch: groups = in_channels follows in_channels" grep -q \
	"name: conv2d_weight, dtype: f32, shape: \[in_channels, 1, kernel_size, kernel_size\]" "$tmp/kbout/depthwise/task.yaml"
ok "batch: 4096 x 393216 from meta, checked by a small CPU forward" sh -c 'grep -q "nominal: {batch_size: 4096, dim: 393216}" "$0" &&
	grep -q "checked by a CPU forward at batch_size=[0-9]*, dim=[0-9]* ([0-9]* elements)" "$0"' "$tmp/kbout/softmax_big/task.yaml"
ok "  in seconds" python3 -c 'import re, sys
t = float(re.search(r"imported  softmax_big.py .*\((\S+) s\)", open(sys.argv[1]).read()).group(1))
assert t < 10, t' "$tmp/kb.out"
ok "batch: no meta kernel: shapes fitted from CPU forwards" sh -c 'grep -q "does not run on the meta device" "$0" &&
	grep -q "name: y, dtype: f32, shape: \[batch_size, channels, depth, height, width\]" "$0"' "$tmp/kbout/scale_by_max/task.yaml"
for t in matmul_expr depthwise softmax_big scale_by_max; do
	ok "batch: $t's manifest validates" "$KGATE" validate "$tmp/kbout/$t/task.yaml"
done

# killed outright (SIGKILL: nothing of kgate can act) in the middle of a directory: each sandboxed
# derivation dies with the thread that started it, so none of the run's processes is left
mkdir -p "$tmp/slow"
for i in 1 2 3; do printf 'import time\ntime.sleep(60)\n' | cat - $D/softmax.py >"$tmp/slow/s$i.py"; done
ok "a killed directory import leaves no derivation running" python3 - "$KGATE" "$tmp" <<'PY'
import os, signal, subprocess, sys, time
kgate, tmp = sys.argv[1], sys.argv[2]
def stat(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    rest = st[st.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), rest[19]  # state, ppid, start time
def tree(root):
    kids = {}
    for d in os.listdir("/proc"):
        s = stat(int(d)) if d.isdigit() else None
        if s:
            kids.setdefault(s[1], []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out
def cmd(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
p = subprocess.Popen([kgate, "task", "import", "--kernelbench", tmp + "/slow", "--out", tmp + "/slowout"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen, deadline = {}, time.time() + 60
while time.time() < deadline and not seen:
    if any("--derive-serve" in cmd(x) for x in tree(p.pid)):
        time.sleep(1)  # the other workers' processes start beside the first
        seen = {x: stat(x)[2] for x in tree(p.pid) if x != p.pid and stat(x)}
    time.sleep(0.05)
assert seen, "no sandboxed derivation was seen running"
p.send_signal(signal.SIGKILL)
p.wait()
left, deadline = list(seen), time.time() + 20
while left and time.time() < deadline:
    time.sleep(0.05)
    left = [x for x in left if stat(x) and stat(x)[2] == seen[x] and stat(x)[0] != "Z"]
for x in left:  # ours: started here, checked against their start times
    os.kill(x, signal.SIGKILL)
assert not left, "left running: " + "; ".join("%d %s" % (x, cmd(x)) for x in left)
print("     %d processes of the run, none left" % len(seen))
PY
finish
