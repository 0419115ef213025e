#!/bin/sh
# `make test-gpu`: the CUDA suite on a GPU machine. The CUDA references are checked against the
# C references; honest CUDA candidates must pass at the nominal (published) shapes; the GPU
# hostile cases must be rejected for their reason; after an endless kernel the GPU must still
# serve the next candidate. Exits 77 (skipped) where no GPU is found.
set -u
. tests/integration/lib.sh
if ! "$KGATE" doctor --gpu; then
	echo "SKIP: no GPU on this machine"
	exit 77
fi
C=examples/cuda
H=$C/hostile
G="--policy tests/data/gpu.yaml"
S="--policy tests/data/gpu-ci.yaml"

for t in softmax layernorm matmul conv_relu_pool; do
	lib=""
	[ $t = matmul ] && lib="--flag -lcublas"
	expect 0 - $t tasks/$t/reference.cu --reference cpu --policy tests/data/refcheck.yaml $lib
done

expect 0 - softmax $C/softmax/online.cu $G
expect 0 - layernorm $C/layernorm/welford.cu $G
expect 0 - matmul $C/matmul/tiled.cu $G
expect 0 - conv_relu_pool $C/conv_relu_pool/fused.cu $G

expect 1 check.async_escape softmax $H/stream_escape.cu $S
expect 1 check.unwritten_output softmax $H/stale_memory.cu $S
expect 1 check.canary softmax $H/oob_guard.cu $S
expect 1 check.input_modified softmax $H/zero_input.cu $S
expect 1 sandbox.syscall softmax $H/host_socket.cu $S
expect 1 sandbox.timeout softmax $H/endless.cu $S
# the GPU survived the endless kernel
expect 0 - softmax $C/softmax/online.cu $S

# compute-sanitizer runs (memcheck, racecheck, synccheck, initcheck): the honest kernels are clean,
# and a read one element past the input, invisible to the checked runs, is found by memcheck alone
Z="--policy tests/data/gpu-sanitize.yaml"
expect 0 - softmax $H/read_past_end.cu $S
expect 1 check.memcheck softmax $H/read_past_end.cu $Z
expect 0 - softmax $C/softmax/online.cu $Z
expect 0 - layernorm $C/layernorm/welford.cu $Z
expect 0 - matmul $C/matmul/tiled.cu $Z
expect 0 - conv_relu_pool $C/conv_relu_pool/fused.cu $Z
finish
