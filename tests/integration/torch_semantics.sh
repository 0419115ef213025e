#!/bin/sh
# Integration: KernelBench module tasks judged by what they mean (issue 33). Buffers keep the
# values the Model's constructor gives them (minGPT's causal mask), running statistics are drawn
# valid, the Model runs in the mode the problem leaves it in (train: BatchNorm's batch statistics)
# or the policy's module_mode, ModelNew's entries are bound by name before shape, the problem's
# Model never enters the candidate's process, shapes the Model itself refuses are dropped with a
# note (never exit 3), and the one-pass variance is caught at a module's base shape in every run.
# Each case an honest module that passes and a hostile one rejected for its reason
# (tests/data/kernelbench/cand: attn_*, ln_*, bn_*, rt_model_fallback.py). Skipped where no
# Python with torch is found.
set -u
. tests/integration/lib.sh
need_torch
Q="--policy ci --iterations 0"
CA="--dims batch_size=2,seq_len=8,max_seqlen=16,n_embd=16,n_head=2"
LN="--dims batch_size=2,features=4,dim1=8,dim2=8"
BN="--dims batch_size=4,features=3,dim1=5,dim2=5"

# minGPT's causal mask is a buffer: kept at the Model's values on both sides, so the reference is
# causal. Dropping the mask is a mismatch; a causal mask made in forward, with no buffer, is fine.
expect 1 check.mismatch $D/causal_attention.py $C/attn_mask_dropped.py $CA $Q
expect 0 - $D/causal_attention.py $C/attn_own_mask.py $CA $Q
ok "  the report says what was drawn and what was kept, and the mode" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
m = d["module"]
e = {x["name"]: x for x in m["entries"]}
assert m["mode"] == "train" and m["mode_from"] == "problem", m
assert e["bias"]["how"] == "kept" and e["bias"]["kind"] == "buffer" and e["bias"]["shape"] == "1x1x16x16", e
assert e["c_attn.weight"]["how"] == "drawn" and e["c_attn.weight"]["kind"] == "parameter", e
assert "bias" not in d["input_order"].split(" [")[0] and "c_attn_weight" in d["input_order"], d["input_order"]' \
	"$tmp/report-$checked.json"
"$KGATE" verify $D/causal_attention.py $C/attn_own_mask.py $CA $Q >"$tmp/own.out" 2>&1
ok "  the summary's module line names the kept mask" grep -q \
	"module: train mode (as the problem leaves it: KernelBench never calls eval()); drawn per trial: c_attn.weight \[48x16\].*kept at the constructor's values: bias \[1x1x16x16\]" \
	"$tmp/own.out"

# bound by name first: the Model's names registered in the other order (a state_dict-order binding
# swapped weight and bias)
expect 0 - $D/layernorm.py $C/ln_names_reordered.py $LN $Q
# a parameter bound neither by name nor by shape: both sides' entries named
"$KGATE" verify $D/conv2d_relu_bias.py $C/conv_wrong_params.py $CV $Q >"$tmp/wp.out" 2>&1
ok "an unbound parameter names both sides' entries" grep -q \
	"no entry bias of that shape and dtype; ModelNew has no other entry of that shape. Model: bias \[4,1,1\], conv.weight \[4,3,3,3\], conv.bias \[4\]; ModelNew: bias \[4\], conv.weight \[4,3,3,3\], conv.bias \[4\]" \
	"$tmp/wp.out"

# two parameters of one shape under names of ModelNew's own: nothing tells which is which, and
# the rejection says so, naming both sides' entries
expect 1 sandbox.protocol $D/layernorm.py $C/ln_renamed.py $LN $Q
ok "  the ambiguity is named" python3 -c '
import json, sys
m = " ".join(r["message"] for r in json.load(open(sys.argv[1]))["reasons"])
assert "by shape it could be any of ModelNew" in m and "Model: ln.weight [4,8,8], ln.bias [4,8,8]; ModelNew: w [4,8,8], b [4,8,8]" in m, m' \
	"$tmp/report-$checked.json"

# the problem's Model is not in the candidate's process, nor its file in the sandbox: a ModelNew that
# falls back to it finds nothing, and its fallback (its input unchanged) is rejected
expect 1 check.mismatch $D/softmax.py $C/rt_model_fallback.py $SM $Q

# one-pass variance at the base shape (check.mismatch, not a variant's check.shape_variant), in
# each of three runs: the large_mean class sized to the module's bound
for i in 1 2 3; do
	expect 1 check.mismatch $D/layernorm.py $C/ln_onepass.py $LN $Q
done

# BatchNorm as the problem leaves it (train mode: the batch's statistics); the running statistics
# drawn (the variance positive), num_batches_tracked kept
expect 0 - $D/batchnorm.py $C/bn_batch_stats.py $BN $Q
ok "  running statistics drawn, the variance as such; the counter kept" python3 -c '
import json, sys
e = {x["name"]: x for x in json.load(open(sys.argv[1]))["module"]["entries"]}
assert e["bn.running_var"]["how"] == "drawn" and e["bn.running_var"]["kind"] == "variance", e
assert e["bn.running_mean"]["kind"] == "statistic" and e["bn.num_batches_tracked"]["how"] == "kept", e' \
	"$tmp/report-$checked.json"
expect 1 check.mismatch $D/batchnorm.py $C/bn_eval_stats.py $BN $Q
# module_mode: eval in the policy: both modules in eval mode, the other way round
sed 's/^trials: 2$/trials: 2\nmodule_mode: eval/' policy/ci.yaml >"$tmp/eval.yaml"
expect 0 - $D/batchnorm.py $C/bn_eval_stats.py $BN --policy "$tmp/eval.yaml" --iterations 0
ok "  the report says the policy's eval mode" python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["module"]
assert m["mode"] == "eval" and m["mode_from"] == "policy", m' "$tmp/report-$checked.json"
expect 1 check.mismatch $D/batchnorm.py $C/bn_batch_stats.py $BN --policy "$tmp/eval.yaml" --iterations 0

# minGPT at a small max_seqlen (seq_len = max_seqlen): the imported ranges keep seq_len <= max_seqlen,
# and an honest copy is accepted (kgate 0.3: exit 3 when a random shape drew seq_len above it)
CS="--dims batch_size=2,seq_len=8,max_seqlen=8,n_embd=16,n_head=2"
"$KGATE" task import $D/causal_attention.py --out "$tmp/ca" $CS >"$tmp/ca.out" 2>&1
ok "import: seq_len <= max_seqlen read from failing forwards, max_seqlen drawn above seq_len's range" sh -c \
	'grep -q "^# random shapes: seq_len <= max_seqlen" "$0" && grep -q "ranges: {batch_size: \[1, 33\], seq_len: \[4, 36\], max_seqlen: \[36, 68\]}" "$0" && grep -q "^# kept (the constructor.s values, never drawn): bias \[1, 1, 8, 8\]" "$0"' \
	"$tmp/ca/task.yaml"
for i in 1 2; do
	expect 0 - $D/causal_attention.py $C/attn_copy.py $CS $Q
done
# a variant the Model refuses (added by hand: seq_len above max_seqlen) is dropped and said so
printf 'variants:\n  - {seq_len: 12}\n' >>"$tmp/ca/task.yaml"
expect 0 - "$tmp/ca/task.yaml" $C/attn_copy.py $Q
ok "  the dropped shape is in the report, with the Model's words" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
drops = d["module"]["dropped_shapes"]
assert len(drops) == 1 and "seq_len=12" in drops[0]["shape"] and "max_seqlen=8" in drops[0]["shape"], drops
assert "forward" in drops[0]["why"], drops
c = [x for x in d["checks"] if x["name"] == "correctness"][0]
assert c["status"] == "pass" and "(1 dropped: the Model refuses them" in c["detail"], c' "$tmp/report-$checked.json"
# a Model that fails only on some data at some shapes (odd rows with a large value: nothing the meta
# device sees): the reference's own failure at run time drops that shape too, never exit 3
"$KGATE" task import $D/refuse_odd_large.py --out "$tmp/rol" --dims batch_size=4,width=16 >"$tmp/rol.out" 2>&1
printf 'variants:\n  - {width: 17}\n' >>"$tmp/rol/task.yaml"
expect 0 - "$tmp/rol/task.yaml" $C/refuse_odd_large_new.py $Q
ok "  the shape the reference failed at is dropped, with its words" python3 -c '
import json, sys
drops = json.load(open(sys.argv[1]))["module"]["dropped_shapes"]
assert any(x["shape"] == "batch_size=4 width=17" and "index 17 is out of bounds" in x["why"] for x in drops), drops' \
	"$tmp/report-$checked.json"
finish
