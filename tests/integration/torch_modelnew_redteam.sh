#!/bin/sh
# Integration: KernelBench ModelNew candidates found by red-teaming the torch path (CPU). Honest
# module patterns kgate once refused (TorchScript made at the top level, names imported from
# torch.utils.cpp_extension, buffers of the ModelNew's own, extension flags for the ISA and
# OpenMP) are accepted; hostile modules are rejected for their reasons. Candidates: tests/data/kernelbench/cand/rt_*.py, each saying at its
# top what it does and which verdict is right.
# Skipped where no Python with torch is found; the load_inline cases where a piece of their toolchain
# is missing (named).
set -u
. tests/integration/lib.sh
need_torch
Q="--policy ci --iterations 0"

# honest: nn.functional, nn.Sequential, a KernelBench answer's layout (Model copy, get_inputs, __main__)
expect 0 - $D/softmax.py $C/rt_honest_functional.py $SM $Q
expect 0 - $D/softmax.py $C/rt_honest_kb_layout.py $SM $Q
# honest: @torch.jit.script at the top level reads the function's source (the module is a module,
# its source in linecache, in the builder and in the run sandbox)
expect 0 - $D/softmax.py $C/rt_honest_jit.py $SM $Q
# honest: CUDA_HOME, include_paths from torch.utils.cpp_extension (the real module, imported in the
# run sandbox without starting a process)
expect 0 - $D/softmax.py $C/rt_honest_ce_names.py $SM $Q
# honest: a persistent buffer of the ModelNew's own, where the Model has no state, and where it
# shifts the Model's parameters in state_dict order (bound by name then)
expect 0 - $D/softmax.py $C/rt_honest_buffer.py $SM $Q
expect 0 - $D/conv2d_relu_bias.py $C/rt_honest_conv_buffer.py $CV $Q
# a parameter that is bound neither in order nor by name: still named, entry and both shapes
"$KGATE" verify $D/conv2d_relu_bias.py $C/conv_wrong_params.py $CV $Q >"$tmp/wp.out" 2>&1
rc=$?
ok "ModelNew whose parameter shape differs: exit 1 (got $rc)" [ $rc -eq 1 ]
ok "  the rejection names the entry, both shapes, and the name that is missing" grep -q "state_dict entry 0, bias, is torch.float32 (4,); the Model's is torch.float32 (4, 1, 1).*no entry bias of that shape" "$tmp/wp.out"

# hostile, caught: the compile log's terminal escapes and invalid UTF-8 neutralised, a flood cut
expect 1 compile.error $D/softmax.py $C/rt_log_escape.py $SM $Q
"$KGATE" verify $D/softmax.py $C/rt_log_escape.py $SM $Q --report json:"$tmp/esc.json" >"$tmp/esc.out" 2>&1
ok "  no ESC byte reaches the terminal" sh -c '! grep -q "$(printf "\033")" "$1"' "$tmp/esc.out"
ok "  the JSON report is valid, its compile log escaped" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert "\x1b" not in d["compile_log"] and "\\x1b[32mverdict: ACCEPTED" in d["compile_log"]' "$tmp/esc.json"
expect 1 sandbox.output_limit $D/softmax.py $C/rt_log_flood.py $SM $Q
# hostile, caught: outputs rounded to fp16 or bfloat16 for an fp32 task
expect 1 check.mismatch $D/softmax.py $C/rt_half_output.py $SM $Q
expect 1 check.mismatch $D/softmax.py $C/rt_bf16_output.py $SM $Q
# hostile, caught: wrong only after the first 60 calls (the timed ones are checked again)
expect 1 check.stale_result $D/softmax.py $C/rt_phase_switch.py --dims batch_size=64,features=4096 --policy ci
# hostile, caught: the work in a thread of its own (threads are off under ci) and a forged claim
expect 1 sandbox.thread $D/softmax.py $C/rt_worker_thread.py $SM $Q

# Found by the red team and fixed on the trusted side (each file's comment says how it worked):
# the build's output a symbolic link to a host file (compile.c lstat's it; torch_modelnew.sh
# asserts nothing of the file is shown) ...
expect 1 compile.error $D/softmax.py $C/rt_symlink_so.py $SM $Q --no-cache
# ... the source the run loads swapped by the build (the run loads kgate's own copy, and the
# module's top level runs where it can write no file: its unlink fails, a compile error) ...
expect 1 compile.error $D/softmax.py $C/rt_swap_source.py $SM $Q --no-cache
# ... the disk filled from the build (no byte written) ...
"$KGATE" verify $D/softmax.py $C/rt_fill_disk.py $SM $Q --no-cache --report json:"$tmp/fill.json" >/dev/null 2>&1
ok "a build that fills the disk: rejected, nothing written" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == 1 and "compile.error" in [r["code"] for r in d["reasons"]], d["reasons"]
assert "wrote 0 MiB" in d["compile_log"], d["compile_log"][-400:]' "$tmp/fill.json"
# ... memory past the policy's bound (RLIMIT_DATA: the allocation fails at LOAD) ...
expect 1 load.error $D/softmax.py $C/rt_memory_hog.py $SM $Q
# ... and in shared anonymous mappings, which RLIMIT_DATA does not count (kgate 0.3 accepted 5 GiB
# under 4096 MiB), also with the pages advised away from its page tables: the supervisor counts
# the process's memory as a whole; under the same 1024 MiB an honest module passes (the torch
# runner's own resident size fits; sanitizer builds run unbounded) ...
if [ -z "${KGATE_SANITIZE:-}" ]; then
	expect 1 sandbox.memory $D/softmax.py $C/rt_shared_hog.py $SM --policy tests/data/memory.yaml --iterations 0
	expect 1 sandbox.memory $D/softmax.py $C/rt_shared_hog_trim.py $SM --policy tests/data/memory.yaml --iterations 0
	expect 0 - $D/softmax.py $C/softmax_modelnew.py $SM --policy tests/data/memory.yaml --iterations 0
fi
# ... and the master seed read from the sandbox's first process's argv (wiped there)
"$KGATE" verify $D/softmax.py $C/rt_seed_cmdline.py $SM $Q --seed 123456789 --report json:"$tmp/seed.json" >"$tmp/seed.out" 2>&1
ok "the seed given on the command line is not in the candidate's reach" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
msg = " ".join(r["message"] for r in d["reasons"])
assert d["exit_code"] == 1 and "master seed seen by the candidate: xxxxxxxxx" in msg, msg
assert "123456789" not in msg' "$tmp/seed.json"
# By KernelBench's rules honest, by kgate's (parameters are per-trial inputs) rejected: weights
# prepared once in __init__ (rt_honest_init_precompute.py, check.mismatch).

# C++ through load_inline (each extension's build takes half a minute on a small machine)
if load_inline_ready; then
	# honest: two extensions, functions as a dict with docstrings, OpenMP with -fopenmp on both lines
	expect 0 - $D/softmax.py $C/rt_honest_two_exts.py $SM $Q
	# honest: two extensions each defining a C++ `forward` (each one's definitions are its own)
	expect 0 - $D/softmax.py $C/rt_honest_same_fn_names.py $SM $Q
	# honest: the ISA flags AVX2 intrinsics need, and harmless -fPIC -g0 -Wno-*
	if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
		expect 0 - $D/softmax.py $C/rt_honest_avx_flags.py $SM $Q
	fi
fi
finish
