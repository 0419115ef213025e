#!/bin/sh
# Integration: KernelBench-format PyTorch modules as tasks (tests/data/kernelbench, written for
# kgate), their Model the trusted reference in the torch runner's sandbox. Honest C candidates are
# accepted at small --dims, zero and constant ones rejected, an honest one written for the wrong
# weight order rejected with the expected order named; eager PyTorch is the timed baseline and
# torch.compile said unavailable where the installed torch lacks it; task import writes manifests.
# Skipped where no Python with torch is found (scripts/deps.sh installs Debian's python3-torch).
set -u
. tests/integration/lib.sh
if ! "$KGATE" doctor 2>/dev/null | grep -q "python    torch: /"; then
	echo "no Python with torch (scripts/deps.sh installs python3-torch)"
	exit 77
fi
D=tests/data/kernelbench
C=$D/cand
SM="--dims batch_size=4,features=64"
LN="--dims batch_size=2,features=4,dim1=8,dim2=8"
CV="--dims batch_size=2,in_channels=3,out_channels=4,height=10,width=10"
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

# timed: eager PyTorch is the baseline, torch.compile unavailable on torch 1.13
"$KGATE" verify $D/matmul.py $C/matmul.c --dims N=64 --policy ci --report json:"$tmp/mm.json" >"$tmp/mm.out" 2>&1
rc=$?
ok "matmul N=64: accepted or, on a loaded host, only timing noise (exit $rc)" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
codes = [r["code"] for r in d["reasons"]]
assert d["exit_code"] == 0 or set(codes) <= {"timing.tampered"}, codes
b = {x["name"]: x for x in d["baselines"]}
assert set(b) == {"eager", "compile"}, b
if d["exit_code"] == 0:
    assert b["eager"]["timed"] and b["eager"]["median_ms"] > 0 and d["best_baseline"] == "eager", b
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
cat >"$tmp/lvl/scalar.py" <<'PY'
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x.sum()
def get_inputs():
    return [torch.randn(8, 8)]
def get_init_inputs():
    return []
PY
"$KGATE" verify "$tmp/lvl/scalar.py" examples/softmax/online.c $Q >"$tmp/scalar.out" 2>&1
rc=$?
ok "a scalar output is exit 2 (got $rc)" [ $rc -eq 2 ]
ok "  and says why" grep -q "0 dimensions" "$tmp/scalar.out"
"$KGATE" task import --kernelbench "$tmp/lvl" --out "$tmp/lvlout" --dims batch_size=4 >"$tmp/lvl.out" 2>&1
rc=$?
ok "a level with one unmappable problem: exit 1 (got $rc), the other imported" sh -c \
	'[ $0 -eq 1 ] && grep -q "imported  softmax.py" "$1" && grep -q "skipped   scalar.py" "$1" && test -f "$2/softmax/task.yaml"' \
	$rc "$tmp/lvl.out" "$tmp/lvlout"
finish
