#!/bin/sh
# Integration: the device half of kgate's torch runner (torch_device.py, as built beside kgate-run)
# driven on the host with a stand-in for the device (torch_device_host.py): a batched RUN's sets
# each with their own inputs and parameters, bound back after the batch, outputs right. The GPU
# itself is tests/gpu/kernelbench35.sh's. And a seed task's torch baseline (tasks/*/baseline.py) on
# the host: not timed unless asked, timed in the same run when asked, torch.compile said unavailable
# on a torch without it. Skipped where no Python with torch is found.
set -u
. tests/integration/lib.sh
need_torch
py=$("$KGATE" doctor 2>/dev/null | sed -n 's/^  python    torch: \([^,]*\),.*/\1/p')
"${py:-/usr/bin/python3}" -I -B tests/integration/torch_device_host.py "$(cd "$B" && pwd)" \
	tests/data/kernelbench >"$tmp/dev.out" 2>&1
rc=$?
grep -v "runtime is found" "$tmp/dev.out"
ok "torch_device.py's batched calls, on the host (exit $rc)" [ $rc -eq 0 ]

# a seed task's baselines beside a C candidate on the host: by default not timed (a torch process a
# run), and said so; KGATE_BASELINES=eager times its eager row with the run's protocol
"$KGATE" verify softmax examples/softmax/online.c --policy ci --report json:"$tmp/b0.json" >/dev/null 2>&1
ok "a seed task on the host: its torch baseline not timed unless asked, and said so" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
b = {x["name"]: x for x in d["baselines"]}
assert d["exit_code"] != 0 or (b["reference"]["timed"] and d["best_baseline"] == "reference"), d["baselines"]
assert not b["eager"]["timed"] and "unless asked" in b["eager"]["status"], b["eager"]' "$tmp/b0.json"
KGATE_BASELINES=eager "$KGATE" verify softmax examples/softmax/online.c --policy ci --report json:"$tmp/b1.json" >/dev/null 2>&1
ok "KGATE_BASELINES=eager: the seed task's baseline.py timed beside the reference" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if d["exit_code"] == 0:
    b = {x["name"]: x for x in d["baselines"]}
    assert b["eager"]["timed"] and b["eager"]["median_ms"] > 0, b["eager"]
    assert "the Model of task softmax\x27s baseline.py" in b["eager"]["how"], b["eager"]
    assert b["eager"]["n"] == d["timing"]["candidate"]["n"], b
    assert d["best_baseline"] == "eager" and not b["compile"]["timed"], d["baselines"]
else:
    assert {r["code"] for r in d["reasons"]} <= {"timing.tampered"}, d["reasons"]' "$tmp/b1.json"
finish
