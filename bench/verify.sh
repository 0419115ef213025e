#!/bin/sh
# `make bench`, verifier part: the time to verify one candidate end to end and its breakdown, the
# spread of repeated timings of one kernel, and (on a GPU) the trusted references' times beside
# the figures in the product brief, all measured in this one run.
set -u
B=${KGATE_BUILD:-build}
K="$B/kgate"
export KGATE_HOME="${KGATE_HOME:-$(pwd)}"
out=$(mktemp -d /tmp/kgate-bench-XXXXXX)
trap 'rm -rf "$out"' EXIT

summary() { # summary JSON LABEL
	python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = d.get("timing", {}); du = d["durations"]
print(f"{sys.argv[2]}: verdict {d['verdict']} at {d['dims']} on {d['device']}")
print(f"  end to end {du['total_s']:.2f} s = compile {du['compile_s']:.2f} + sandbox start {du['sandbox_start_s']:.2f}"
      f" + checks {du['checks_s']:.2f} + timing {du['timing_s']:.2f} (+ setup/teardown)")
if t:
    c, r = t["candidate"], t["reference"]
    print(f"  candidate {c['median_ms']:.4f} ms (spread {100*c['spread']:.2f} %), reference {r['median_ms']:.4f} ms "
          f"(spread {100*r['spread']:.2f} %), speedup {t['speedup']:.3f}x, {t['gbps']:.1f} GB/s"
          + (f" = {100*t['roofline']:.1f} % of {t['ceiling_gbps']:.0f} GB/s" if t['roofline'] else ""))
PY
}

# Side by side, one run: kgate against an unhardened plain harness (bench/plain_harness.c) doing the
# same trials: one per input class at softmax 1024x65536 (a 256 MiB tensor), compile included,
# no timing. The task is the shipped one plus a `bench` shape set, in a scratch copy.
echo "kgate bench: CPU verification against a plain harness, softmax 1024x65536, one trial per class"
mkdir -p "$out/task" && cp tasks/softmax/task.yaml tasks/softmax/reference.c tasks/softmax/reference.cu tasks/softmax/baseline.py "$out/task/"
sed -i 's/^  ci: {R: 64, C: 1000}$/&\n  bench: {R: 1024, C: 65536}/' "$out/task/task.yaml"
ncls=$("$K" verify "$out/task/task.yaml" examples/softmax/online.c --policy bench/cpu.yaml --no-cache --quiet \
	--report json:"$out/cpu-vs.json"; python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['trials'])" "$out/cpu-vs.json")
"$B/bench/peer/plain_harness" "$out/task/reference.c" examples/softmax/online.c 1024 65536 "$ncls" 1e-5 1e-3 | tee "$out/plain.txt"
python3 - "$out/cpu-vs.json" "$out/plain.txt" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1])); du = d["durations"]
plain = float(re.search(r"in ([0-9.]+) s", open(sys.argv[2]).read()).group(1))
print(f"kgate: {d['verdict']} in {du['total_s']:.2f} s = compile {du['compile_s']:.2f} + sandbox start "
      f"{du['sandbox_start_s']:.2f} + checks {du['checks_s']:.2f} ({d['trials']} trials)")
print(f"kgate / plain harness: {du['total_s'] / plain:.2f}x (goal <= 1.2x)")
PY
echo

echo "kgate bench: verification (CPU backend, ci shapes)"
"$K" verify softmax examples/softmax/online.c --policy policy/ci.yaml --quiet --report json:"$out/cpu.json"
summary "$out/cpu.json" "softmax online.c (cpu)"

if ! "$K" doctor --gpu >/dev/null 2>&1; then
	echo "no GPU here: the GPU measurements are skipped"
	exit 0
fi
echo
echo "kgate bench: verification on the GPU ($("$K" doctor --gpu))"
if [ -z "${KGATE_BENCH_REFS_ONLY:-}" ]; then
	"$K" verify softmax examples/cuda/softmax/online.cu --policy policy/default.yaml --trials 1 --quiet \
		--report json:"$out/gpu-e2e.json"
	summary "$out/gpu-e2e.json" "softmax online.cu, default policy (all classes, variants)"
	echo
	echo "end to end per task at the nominal shape, default policy, each run twice: a cold compile cache, then warm"
	for tc in softmax:softmax/online.cu layernorm:layernorm/welford.cu matmul:matmul/tiled.cu \
		conv_relu_pool:conv_relu_pool/fused.cu; do
		t=${tc%%:*}
		"$K" verify $t examples/cuda/${tc#*:} --policy policy/default.yaml --trials 1 --quiet --no-cache \
			--report json:"$out/e2e-$t-cold.json"
		"$K" verify $t examples/cuda/${tc#*:} --policy policy/default.yaml --trials 1 --quiet \
			--report json:"$out/e2e-$t-warm.json"
		"$K" verify $t examples/cuda/${tc#*:} --policy policy/default.yaml --trials 1 --quiet \
			--report json:"$out/e2e-$t-warm.json"
	done
	python3 - "$out" <<'PY'
import json, os, sys
print(f"  {'task':<16}{'verdict':>9}{'cold s':>8}{'warm s':>8}{'start':>7}{'checks':>8}{'timing':>8}{'trials':>7}{'spread':>8}{'per GPU-hour':>14}")
for t in ("softmax", "layernorm", "matmul", "conv_relu_pool"):
    c = json.load(open(os.path.join(sys.argv[1], f"e2e-{t}-cold.json")))
    w = json.load(open(os.path.join(sys.argv[1], f"e2e-{t}-warm.json")))
    du = w["durations"]
    sp = w.get("timing", {}).get("candidate", {}).get("spread", float("nan"))
    print(f"  {t:<16}{w['verdict']:>9}{c['durations']['total_s']:>8.2f}{du['total_s']:>8.2f}{du['sandbox_start_s']:>7.2f}"
          f"{du['checks_s']:>8.2f}{du['timing_s']:>8.2f}{w['trials']:>7}{100*sp:>7.1f}%{3600/du['total_s']:>14.0f}")
PY
fi
echo
echo "trusted references at the nominal shapes (CUDA events, L2 flushed, fresh inputs, median of 20):"
for t in softmax layernorm matmul conv_relu_pool; do
	lib=""
	[ $t = matmul ] && lib="--flag -lcublas"
	[ $t = conv_relu_pool ] && lib="--shape-set large"
	"$K" verify $t tasks/$t/reference.cu --policy bench/bench.yaml $lib --quiet --report json:"$out/ref-$t.json"
done
python3 - "$out" <<'PY'
import json, os, sys
brief = {"softmax": (1.05, 0.78), "layernorm": (8.16, 0.33), "matmul": (2.68, None), "conv_relu_pool": (None, None)}
print(f"  {'task':<16}{'kgate ref ms':>13}{'spread':>9}{'GB/s':>9}{'GFLOP/s':>10}{'brief eager':>13}{'brief compile':>15}{'eager/ref':>11}")
for t, (eager, comp) in brief.items():
    d = json.load(open(os.path.join(sys.argv[1], f"ref-{t}.json")))
    tm = d.get("timing")
    if not tm:
        why = "; ".join(f"{r['code']}: {r['message'][:160]}" for r in d["reasons"][:2])
        print(f"  {t:<16} (no timing: {d['verdict']}) {d.get('error','')}{why}")
        continue
    r = tm["reference"]["median_ms"]
    gbps = tm["bytes"] / (r * 1e-3) / 1e9 if r else 0
    gfl = tm["flops"] / (r * 1e-3) / 1e9 if r else 0
    e = f"{eager:.2f}" if eager else "-"
    c = f"{comp:.2f}" if comp else "-"
    ratio = f"{eager / r:.2f}x" if eager and r else "-"
    print(f"  {t:<16}{r:>13.4f}{100*tm['reference']['spread']:>8.2f}%{gbps:>9.0f}{gfl:>10.0f}{e:>13}{c:>15}{ratio:>11}")
PY
