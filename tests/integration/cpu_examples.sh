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
# the references themselves pass, through a task given by path
expect 0 - tasks/matmul/task.yaml tasks/matmul/reference.c $P

# usage and configuration errors are exit 2, never a crash
expect 2 - softmax /nonexistent.c $P
expect 2 - no_such_task examples/softmax/online.c $P
expect 2 - softmax examples/softmax/online.c --policy /nonexistent.yaml
expect 2 - softmax examples/softmax/online.c $P --shape-set huge
finish
