#!/bin/sh
# Integration: the real kgate binary on the shipped CPU examples. Honest candidates must be
# accepted on every task; the plausible-but-wrong softmax must be rejected for a mismatch.
set -u
. tests/integration/lib.sh

P="--policy policy/ci.yaml --iterations 5"
expect 0 - softmax examples/softmax/online.c $P
expect 0 - layernorm examples/layernorm/welford.c $P
expect 0 - matmul examples/matmul/blocked.c $P
expect 0 - conv_relu_pool examples/conv_relu_pool/fused.c $P
expect 1 check.nan softmax examples/softmax/wrong_no_max.c $P
# the references themselves pass, through a task given by path (matmul's runs on every core)
expect 0 - tasks/matmul/task.yaml tasks/matmul/reference.c --policy tests/data/threads.yaml --iterations 5

# broken candidates: their own reason codes, before any trial runs
expect 1 compile.error softmax examples/broken/syntax_error.c $P
expect 1 compile.error softmax examples/broken/include_shadow.c $P
expect 1 load.error softmax examples/broken/no_abi.c $P
# the compile log shows the compiler's complaint but never the host file's content
"$KGATE" verify softmax examples/broken/include_shadow.c $P --quiet --report json:"$tmp/shadow.json" >/dev/null 2>&1
if grep -q 'root:' "$tmp/shadow.json"; then
	failures=$((failures + 1))
	echo "FAIL the compile log leaks /etc/shadow"
fi

# a policy's compute-sanitizer runs are for CUDA candidates: a CPU one says they were skipped
printf 'kgate_policy: 1\nshape_set: ci\ngpu: {compute_sanitizer: [memcheck, racecheck]}\n' >"$tmp/san.yaml"
expect 0 - softmax examples/softmax/online.c --policy "$tmp/san.yaml" --iterations 5
if ! python3 -c 'import json,sys
c=[c for c in json.load(open(sys.argv[1]))["checks"] if c["name"]=="compute-sanitizer"]
sys.exit(0 if c and c[0]["status"]=="skip" else 1)' "$tmp/report-$checked.json"; then
	failures=$((failures + 1))
	echo "FAIL a CPU candidate under a compute-sanitizer policy does not report the runs as skipped"
fi

# a layer the policy requires but the host (here: the caller) refuses is exit 3, never a downgrade
expect 3 sandbox.setup softmax examples/softmax/online.c --policy policy/strict.yaml --shape-set ci --no-layer landlock

# usage and configuration errors are exit 2, never a crash
expect 2 - softmax /nonexistent.c $P
expect 2 - no_such_task examples/softmax/online.c $P
expect 2 - softmax examples/softmax/online.c --policy /nonexistent.yaml
expect 2 - softmax examples/softmax/online.c $P --shape-set huge
finish
