#!/bin/sh
# `make demo`: verifies the shipped example candidates, on the CPU backend always and on the
# GPU when one is present, and prints each verdict. Exit status is non-zero if any honest example
# is rejected or the wrong one is accepted.
set -u
build=${1:-build}
K="$build/kgate"
export KGATE_HOME="$(pwd)"
status=0

run() { # run WANT TASK CANDIDATE [args]
	want=$1; shift
	echo "================================================================"
	echo "kgate verify $*"
	"$K" verify "$@"
	rc=$?
	if [ "$rc" != "$want" ]; then
		echo "demo: expected exit $want, got $rc" >&2
		status=1
	fi
}

echo "kgate demo: CPU backend (policy/ci.yaml: the tasks' small 'ci' shapes)"
run 0 softmax examples/softmax/online.c --policy policy/ci.yaml
run 0 layernorm examples/layernorm/welford.c --policy policy/ci.yaml
run 0 matmul examples/matmul/blocked.c --policy policy/ci.yaml
run 0 conv_relu_pool examples/conv_relu_pool/fused.c --policy policy/ci.yaml
run 1 softmax examples/softmax/wrong_no_max.c --policy policy/ci.yaml

if [ -e /dev/nvidiactl ] || command -v nvidia-smi >/dev/null 2>&1; then
	echo "kgate demo: CUDA backend (nominal shapes)"
	for task in softmax layernorm matmul conv_relu_pool; do
		for f in examples/cuda/$task/*.cu; do
			[ -f "$f" ] && run 0 "$task" "$f"
		done
	done
	run 1 softmax examples/cuda/hostile/stream_escape.cu --shape-set ci
else
	echo "kgate demo: no GPU here; the CUDA examples are skipped"
fi
exit $status
