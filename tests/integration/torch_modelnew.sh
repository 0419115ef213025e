#!/bin/sh
# Integration: KernelBench ModelNew modules as candidates for module tasks (tests/data/kernelbench,
# written for kgate), run by the torch runner in the candidate's run sandbox on the trusted side's
# tensors, their parameters bound to the Model's in state_dict order, their load_inline extensions
# built by kgate's builder in the compile sandbox. Honest ones (plain PyTorch, the Model's own
# forward, C++ through load_inline) are accepted; KernelBench's own adversarial kernels, as CPU
# ports, and the runner's clock patched from the module are rejected for their reasons.
# Skipped where no Python with torch is found; the load_inline cases where a piece of their toolchain
# is missing (kgate doctor names it; scripts/deps.sh installs them all).
set -u
. tests/integration/lib.sh
need_torch
Q="--policy ci --iterations 0"

expect 0 - $D/softmax.py $C/softmax_modelnew.py $SM $Q
# the Model's own forward as ModelNew: correct, so accepted (not faster, which the timing says)
expect 0 - $D/softmax.py $C/softmax_same_as_model.py $SM $Q
# parameters bound in state_dict order: conv weight, conv bias and the added bias take the Model's
expect 0 - $D/conv2d_relu_bias.py $C/conv_modelnew.py $CV $Q
# a parameter of another shape cannot be bound: named, entry and both shapes
"$KGATE" verify $D/conv2d_relu_bias.py $C/conv_wrong_params.py $CV $Q --report json:"$tmp/wp.json" >"$tmp/wp.out" 2>&1
rc=$?
ok "ModelNew whose parameter shape differs: exit 1 (got $rc)" [ $rc -eq 1 ]
ok "  the rejection names the entry and both shapes" grep -q "state_dict entry 0, bias, is torch.float32 (4,); the Model's is torch.float32 (4, 1, 1)" "$tmp/wp.out"
ok "  and the summary says how parameters are bound" grep -q "ModelNew's parameters and buffers take the Model's" "$tmp/wp.out"

# KernelBench's adversarial kernels (src/kernelbench/unit_tests/test_kernels), ported to the CPU:
# inputs zeroed in place (the trusted side's input pages are read-only: the write faults) ...
expect 1 sandbox.crash $D/softmax.py $C/softmax_zero_inputs.py $SM $Q
# ... and an output the kernel never wrote (torch.empty), hoping for an earlier result's memory
expect 1 check.mismatch $D/softmax.py $C/softmax_empty.py $SM $Q
# a result cached under the input's address, which the trusted side keeps while the values change
expect 1 check.mismatch $D/softmax.py $C/softmax_ptr_cache.py $SM $Q
# the runner's clock patched from the module: its claims fall far below the CPU time charged
expect 1 timing.tampered $D/softmax.py $C/softmax_fake_clock.py --dims batch_size=64,features=4096 --policy ci
# not a ModelNew module: a compile error with the builder's words
expect 1 compile.error $D/softmax.py $C/softmax_no_class.py $SM $Q
"$KGATE" verify $D/softmax.py $C/softmax_no_class.py $SM $Q --report json:"$tmp/nc.json" >/dev/null 2>&1
ok "  the compile log says what is missing" python3 -c '
import json, sys
assert "defines no class ModelNew" in json.load(open(sys.argv[1]))["compile_log"]' "$tmp/nc.json"
# the build runs the module's top level: one that leaves a symbolic link to a host file as the
# build's output is a compile error, and nothing of that file is followed, cached or shown
RT_TARGET="$(pwd)/README.md" expect 1 compile.error $D/softmax.py $C/rt_symlink_so.py $SM $Q --no-cache
"$KGATE" verify $D/softmax.py $C/rt_symlink_so.py $SM $Q --report json:"$tmp/sl.json" >"$tmp/sl.out" 2>&1
# (the module's top level may create no file at all, where the kernel has Landlock; where it has
# not, the link it leaves is refused by the host)
ok "  the log says the link was refused, and the README's words appear nowhere" sh -c \
	'grep -q -e "is not a regular file (a symbolic link)" -e "PermissionError" "$0" && ! grep -q "hardened verification gate" "$0" "$1"' \
	"$tmp/sl.json" "$tmp/sl.out"
# a CUDA ModelNew where kgate's torch has no CUDA (Debian's 1.13), and a Triton one where it has no
# Triton: each a compile error that names the torch and what it lacks (the module's own claim of
# CUDA sources or Triton kernels must not make its verdict "not verified"); where the torch has
# CUDA and a GPU is here, tests/gpu/kernelbench35.sh runs them
if "$KGATE" doctor 2>/dev/null | grep -q "python    torch: .*(no CUDA)"; then
	"$KGATE" verify $D/matmul.py $C/matmul_cuda_inline.py --dims N=64 $Q --report json:"$tmp/cu.json" >/dev/null 2>&1
	ok "a CUDA ModelNew where torch has no CUDA: compile.error saying why" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == 1 and [r["code"] for r in d["reasons"]] == ["compile.error"], d["reasons"]
assert "has CUDA sources, and the torch here (" in d["compile_log"], d["compile_log"][-300:]
assert "has no CUDA: a CUDA ModelNew is built and run only where" in d["compile_log"], d["compile_log"][-300:]' "$tmp/cu.json"
	"$KGATE" verify $D/softmax.py tests/data/kernelbench/gpu/softmax_triton.py $SM $Q --report json:"$tmp/tri.json" >/dev/null 2>&1
	ok "a Triton ModelNew where torch has no Triton: compile.error saying why" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == 1 and [r["code"] for r in d["reasons"]] == ["compile.error"], d["reasons"]
assert "the module imports Triton, and the torch here (" in d["compile_log"], d["compile_log"][-300:]' "$tmp/tri.json"
else
	echo "skip the no-CUDA refusals: kgate's torch has CUDA (tests/gpu/kernelbench35.sh runs these modules)"
fi
# a ModelNew for a task that is not a module: a usage error
"$KGATE" verify softmax $C/softmax_modelnew.py --policy ci >"$tmp/notmod.out" 2>&1
rc=$?
ok "a ModelNew for a manifest task: exit 2 (got $rc)" sh -c '[ $0 -eq 2 ] && grep -q "needs a task given as a PyTorch module" "$1"' $rc "$tmp/notmod.out"

# C++ through load_inline: built by kgate's builder in the compile sandbox, loaded by name in the
# run sandbox; where a piece of the toolchain is missing these are skipped, and such a build is not
# the candidate's fault: not verified (exit 3), the missing piece named
if load_inline_ready; then
	expect 0 - $D/softmax.py $C/softmax_inline.py $SM $Q
	# the second run of the same source comes from the compile cache (the builder did not run)
	"$KGATE" verify $D/softmax.py $C/softmax_inline.py $SM $Q --report json:"$tmp/inl.json" >/dev/null 2>&1
	ok "load_inline: the second build is the compile cache's" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == 0 and d["durations"]["compile_cached"], d["durations"]' "$tmp/inl.json"
	expect 1 sandbox.crash $D/softmax.py $C/softmax_inline_zero.py $SM $Q
else
	"$KGATE" verify $D/softmax.py $C/softmax_inline.py $SM $Q >"$tmp/notool.out" 2>&1
	rc=$?
	ok "load_inline without its toolchain: exit 3 naming the missing piece (got $rc)" \
		sh -c '[ "$1" = 3 ] && grep -q "lacks what a ModelNew.s build needs: missing .*(Debian: " "$2"' - \
		"$rc" "$tmp/notool.out"
fi
finish
