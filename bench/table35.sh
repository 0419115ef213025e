#!/bin/sh
# The seed table (issue #35), measured in one device run on the machine it runs on:
#   KGATE_BUILD=build sh bench/table35.sh            (tests/gpu/kernelbench35.sh calls it)
# For each seed task at its nominal shape: kgate's CUDA reference, eager PyTorch and torch.compile
# of the task's torch baseline (tasks/*/baseline.py), each timed by kgate-device's span in the same
# kgate run as an honest .cu candidate (examples/cuda); then an honest CUDA ModelNew and a Triton one
# (tests/data/kernelbench/gpu) verified against the same torch module as their task, at the same
# shape, on the same warm machine. Each time is the median of the policy's timed calls with its
# spread ((p90 - p10) / median); the speedup is against the faster of eager and torch.compile, named.
# Prints the table, then the JSON reports' directory. Exit 0 when every row was measured. Each kgate
# run is bounded (TABLE35_STEP_S, default 180 s); none starts after TABLE35_DEADLINE (epoch seconds).
set -u
B=${KGATE_BUILD:-build}
KGATE="$B/kgate"
if ! "$KGATE" doctor --gpu >/dev/null 2>&1; then
	echo "SKIP: no GPU on this machine"
	exit 77
fi
if [ -z "${KGATE_PYTHON:-}" ] && [ -x /opt/torch/.venv/bin/python3 ]; then
	export KGATE_PYTHON=/opt/torch/.venv/bin/python3
fi
out=${TABLE35_OUT:-$(mktemp -d /tmp/kgate-table35-XXXXXX)}
mkdir -p "$out"
export KGATE_CACHE_DIR="${KGATE_CACHE_DIR:-$out/cache}"
P="--policy tests/data/gpu35.yaml --shapes nominal"
step=${TABLE35_STEP_S:-180}
# one bounded kgate run (LABEL ARGS...): skipped past the deadline, its report at $out/LABEL.json
one() {
	label=$1
	shift
	lim=$step
	if [ -n "${TABLE35_DEADLINE:-}" ]; then
		l=$((TABLE35_DEADLINE - $(date +%s)))
		[ $l -lt $lim ] && lim=$l
	fi
	if [ $lim -lt 20 ]; then
		echo "skipped: past the deadline" >"$out/$label.out"
		return 1
	fi
	timeout -k 10 $lim "$KGATE" verify "$@" --quiet --report "json:$out/$label.json" >"$out/$label.out" 2>&1
}
G=tests/data/kernelbench/gpu
status=0
for t in softmax matmul layernorm conv_relu_pool; do
	case $t in
	softmax) cu=examples/cuda/softmax/online.cu mn=softmax ;;
	matmul) cu=examples/cuda/matmul/tiled.cu mn=matmul ;;
	layernorm) cu=examples/cuda/layernorm/welford.cu mn=layernorm ;;
	conv_relu_pool) cu=examples/cuda/conv_relu_pool/fused.cu mn=conv ;;
	esac
	# kgate's reference, eager and compile, beside an honest .cu candidate
	export KGATE_BASELINES=all
	one $t-ref $t $cu $P || status=1
	# the ModelNew candidates against the same torch module (their task), baselines already measured
	export KGATE_BASELINES=none
	one $t-cuda tasks/$t/baseline.py $G/${mn}_cuda.py $P || status=1
	one $t-triton tasks/$t/baseline.py $G/${mn}_triton.py $P || status=1
done
python3 - "$out" <<'PY' || status=1
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
def cell(ms, spread):
    return "%9.4f ms %5.1f%%" % (ms, 100 * spread) if ms else "%18s" % "-"
device = None
rows, bad = [], 0
for t in ("softmax", "matmul", "layernorm", "conv_relu_pool"):
    ref = load("%s-ref.json" % t)
    base = {b["name"]: b for b in (ref or {}).get("baselines", [])}
    device = device or (ref or {}).get("device")
    def row_ms(b):
        return (b["median_ms"], b.get("spread", 0)) if b and b.get("timed") else (None, 0)
    r_ms, r_sp = row_ms(base.get("reference"))
    e_ms, e_sp = row_ms(base.get("eager"))
    c_ms, c_sp = row_ms(base.get("compile"))
    timed = [(n, m) for n, m in (("eager", e_ms), ("compile", c_ms)) if m]
    best = min(timed, key=lambda x: x[1]) if timed else None
    line = "%-15s %s %s %s" % (t, cell(r_ms, r_sp), cell(e_ms, e_sp), cell(c_ms, c_sp))
    for kind in ("cuda", "triton"):
        d = load("%s-%s.json" % (t, kind))
        tm = (d or {}).get("timing")
        if d and d["exit_code"] == 0 and tm:
            ms = tm["candidate"]["median_ms"]
            sp = "%6.2fx" % (best[1] / ms) if best else "    -  "
            line += " %s %s" % (cell(ms, tm["candidate"]["spread"]), sp)
        else:
            bad += 1
            why = "rejected" if d and d["exit_code"] == 1 else "not verified" if d else "no report"
            line += " %18s %7s" % (why, "")
    line += "  vs %s" % (best[0] if best else "-")
    if not (r_ms and e_ms):
        bad += 1
    rows.append(line)
print("seed table (issue #35) on %s: median over the policy's timed calls, spread (p90-p10)/median;" % (device or "?"))
print("speedup against the faster of eager and torch.compile (named); kgate's reference a row of its own")
print("%-15s %18s %18s %18s %18s %7s %18s %7s" % ("task", "kgate reference", "eager", "torch.compile",
                                                 "CUDA ModelNew", "speedup", "Triton ModelNew", "speedup"))
for l in rows:
    print(l)
print("reports: %s" % out)
sys.exit(1 if bad else 0)
PY
exit $status
