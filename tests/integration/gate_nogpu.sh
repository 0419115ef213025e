#!/bin/sh
# Integration: a candidate that did not run is never accepted. Where no GPU is usable, a .cu
# candidate is exit 3 ("not verified") under every shipped policy, the `ci` one included (kgate 0.1
# accepted examples/cuda/hostile/zero_input.cu with exit 0 there); a .cu that does not compile is
# still a rejection (exit 1): that verdict needs no GPU.
set -u
. tests/integration/lib.sh
if "$KGATE" doctor --gpu >/dev/null 2>&1; then
	echo "a GPU is present: the no-GPU gate is exercised by make test-gpu hosts without one"
	exit 77
fi
# a .cu is built before the GPU is looked for: without the CUDA toolkit (optional, not in
# scripts/deps.sh) the reference does not compile and the run is not verified for that reason
# instead; these cases need nvcc and are skipped, naming it, where it is missing
nvcc=$("$KGATE" doctor 2>/dev/null | grep "compiler  cuda:")
case "$nvcc" in
*"not found"*)
	echo "skip: no CUDA toolkit ($nvcc)"
	exit 77 ;;
esac
for pol in ci default strict; do
	"$KGATE" verify softmax examples/cuda/hostile/zero_input.cu --policy $pol --quiet \
		--report json:"$tmp/$pol.json" >"$tmp/$pol.out" 2>&1
	rc=$?
	ok "no GPU, policy $pol: a .cu is exit 3 (got $rc)" [ $rc -eq 3 ]
	ok "no GPU, policy $pol: the report says not verified" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verdict"] == "error" and d["exit_code"] == 3, d["verdict"]
assert "not verified" in d["error"], d["error"]' "$tmp/$pol.json"
done
"$KGATE" verify softmax examples/cuda/hostile/zero_input.cu --policy ci >"$tmp/text.out" 2>&1
ok "no GPU: the summary says NOT VERIFIED" grep -q "verdict: NOT VERIFIED (exit 3)" "$tmp/text.out"
ok "no GPU: the summary never says ACCEPTED" sh -c '! grep -q ACCEPTED "$1"' _ "$tmp/text.out"
# The static check runs without a GPU: host code's `static __thread` (__tls_get_addr) passes it on
# the CUDA backend as on the CPU one (kgate 0.2: exit 1, static.forbidden_symbol); the candidate
# still did not run, so exit 3.
"$KGATE" verify softmax examples/cuda/unusual/tls_launch.cu --policy ci --quiet --report json:"$tmp/tls.json" \
	>"$tmp/tls.out" 2>&1
rc=$?
ok "no GPU: a .cu with host __thread is exit 3, its imports allowed (got $rc)" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == 3 and not d["reasons"], (d["exit_code"], d["reasons"])
c = [c for c in d["checks"] if c["name"] == "static-imports"]
assert c and c[0]["status"] == "pass", c' "$tmp/tls.json"
# TMA tensor maps by a route the policy shows (kgate 0.3 refused the runtime's driver entry points,
# the one way to cuTensorMapEncodeTiled it knew, whatever the policy): the driver's tensor-map
# encoders imported by name pass the static check under gpu.tensor_maps (the default), and are
# static.forbidden_symbol where a policy turns it off; cudaGetDriverEntryPoint* stays refused, and
# its rejection names the key that lifts it, gpu.driver_entry_points
imports() { # imports NAME EXIT CODE|- TASK CANDIDATE POLICY [SYMBOL]
	"$KGATE" verify "$4" "$5" --policy "$6" --quiet --report json:"$tmp/$1.json" >"$tmp/$1.out" 2>&1
	rc=$?
	ok "no GPU: $1 (exit $rc, want $2 ${3})" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
codes = [r["code"] for r in d["reasons"]]
assert d["exit_code"] == int(sys.argv[2]), (d["exit_code"], codes)
if sys.argv[3] == "-":
    assert not codes, codes
    c = [c for c in d["checks"] if c["name"] == "static-imports"]
    assert c and c[0]["status"] == "pass", c
else:
    r = [r for r in d["reasons"] if r["code"] == sys.argv[3]]
    assert r and sys.argv[4] in r[0]["message"], codes
    if len(sys.argv) > 5:
        assert sys.argv[5] in r[0]["message"], r[0]["message"]' "$tmp/$1.json" "$2" "$3" "${7:-}" ${8:+"$8"}
}
imports tma-default 3 - matmul examples/cuda/matmul/tma.cu ci
imports tma-maps-off 1 static.forbidden_symbol matmul examples/cuda/matmul/tma.cu tests/data/nogpu-no-tensor-maps.yaml \
	cuTensorMapEncodeTiled
imports entry-default 1 static.forbidden_symbol matmul examples/cuda/unusual/tma_entry_point.cu ci \
	cudaGetDriverEntryPointByVersion gpu.driver_entry_points
imports entry-lifted 3 - matmul examples/cuda/unusual/tma_entry_point.cu tests/data/nogpu-entry.yaml
finish
