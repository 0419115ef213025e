#!/bin/sh
# Issue #35's GPU part in one call (make test-gpu runs it after run.sh; or alone, beside it):
#   KGATE_BUILD=build sh tests/gpu/kernelbench35.sh
# KernelBench ModelNew candidates on kgate-device's memory: CUDA through load_inline (built by kgate's
# nvcc command) and Triton (compiled in a warm-up ahead of the run), KernelBench's own adversarial
# kernels each rejected for its reason, KernelBench problems at their own shapes with honest CUDA
# ModelNew candidates (level 1 softmax 4096 x 393216, matmul 4096^2, LayerNorm (16,64,256,256), the
# level-2 Gemm_Multiply_LeakyReLU block and the level-3 MLP), eager and torch.compile timed beside
# them in the same run, and the seed table (bench/table35.sh). Each section prints its seconds.
# Needs a GPU, kgate's Python with a torch that has CUDA (KGATE_PYTHON=/opt/torch/.venv/bin/python3)
# and Triton for the Triton cases; exits 77 (skipped) otherwise. KB35_TABLE=0 leaves the table out.
set -u
. tests/integration/lib.sh
if ! "$KGATE" doctor --gpu >/dev/null 2>&1; then
	echo "SKIP: no GPU on this machine"
	exit 77
fi
need_torch
tv=$("$KGATE" doctor 2>/dev/null | grep "python    torch:")
echo "$tv"
case "$tv" in *"(CUDA "*) ;; *)
	echo "SKIP: kgate's torch has no CUDA (set KGATE_PYTHON to a Python whose torch has)"
	exit 77 ;;
esac
triton=0
case "$tv" in *", Triton"*) triton=1 ;; esac
G=tests/data/kernelbench/gpu
KB=tests/data/kernelbench/kb
ADV=tests/data/kernelbench/kb_adversarial
# correctness at small shapes (one trial per class), untimed: the honest candidates and the attacks
QC="--policy tests/data/gpu-ci.yaml --iterations 0"
# KernelBench's own shapes: one trial per class at the nominal shape, 10 timed calls
QN="--policy tests/data/gpu.yaml --shapes nominal"
SM="--dims batch_size=64,features=1000"
t0=$(date +%s)
section() { echo "== $1 ($(($(date +%s) - t0)) s so far)"; }

# check WANT_EXIT WANT_CODE JSON LABEL: a verification run earlier (in the background), judged now
check() {
	checked=$((checked + 1))
	if python3 - "$1" "$2" "$3" <<'PY'; then
import json, sys
want, code, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
d = json.load(open(path))
codes = [r["code"] for r in d["reasons"]]
ok = d["exit_code"] == want and (codes == [] if code == "-" else code in codes)
t = d.get("timing")
s = "exit %d %s" % (d["exit_code"], " ".join(codes) or "(no reasons)")
if t:
    s += "; cand %.4f ms (spread %.1f%%, batch %d), ref %.4f ms" % (t["candidate"]["median_ms"], 100 * t["candidate"]["spread"], t["candidate"].get("batch", 1), t["reference"]["median_ms"])
for b in d.get("baselines", []):
    if b["timed"]:
        s += "; %s %.4f ms" % (b["name"], b["median_ms"])
print("    " + s)
for r in d["reasons"][:2]:
    print("     >", r["code"], r["message"][:240])
if d.get("error"):
    print("     | error:", d["error"][:400])
if not ok and d.get("compile_log"):
    print("     | compile log:", d["compile_log"][-1200:].replace("\n", "\n     | "))
sys.exit(0 if ok else 1)
PY
		echo "ok   $4"
	else
		failures=$((failures + 1))
		echo "FAIL $4: want exit $1 with $2"
	fi
}

# run LABEL TASK CANDIDATE ARGS...: a verification in the background, its report at $tmp/LABEL.json
run() {
	label=$1 task=$2 cand=$3
	shift 3
	"$KGATE" verify "$task" "$cand" --quiet --report "json:$tmp/$label.json" "$@" >"$tmp/$label.out" 2>&1 &
}

section "builds and correctness at small shapes, and KernelBench's adversarial kernels (in parallel)"
# every CUDA candidate's build lands in this script's compile cache here: the nominal runs below reuse it
run sm_cuda $D/softmax.py $G/softmax_cuda.py $SM $QC
run mm_cuda $D/matmul.py $G/matmul_cuda.py --dims N=257 $QC
run ln_cuda tasks/layernorm/baseline.py $G/layernorm_cuda.py --dims B=2,F=3,D1=33,D2=65 $QC
run ln_kb_cuda $KB/40_LayerNorm.py $G/layernorm_kb_cuda.py --dims batch_size=2,features=4,dim1=32,dim2=33 $QC
run conv_cuda tasks/conv_relu_pool/baseline.py $G/conv_cuda.py $QC
run gemm_cuda $KB/12_Gemm_Multiply_LeakyReLU.py $G/gemm_leaky_cuda.py --dims batch_size=16,in_features=256,out_features=192 $QC
run mlp_cuda $KB/1_MLP.py $G/mlp_cuda.py --dims batch_size=8,input_size=512,output_size=64 $QC
# KernelBench's adversarial kernels against its own 1_Square_matrix_multiplication_ (N = 4096):
# torch::empty hoping for the reference's freed result (kgate's outputs are poisoned on the device
# and the reference's live in another process: what comes back is the allocator's, not the answer)
run adv_reuse $KB/1_Square_matrix_multiplication_.py $ADV/result_reuse_kernel.py $QC --shapes nominal
# the inputs zeroed in place: kgate-device compares them with what it staged after the call
run adv_zero $KB/1_Square_matrix_multiplication_.py $ADV/zero_out_kernel.py $QC --shapes nominal
# the product on a private non-blocking stream, returned before it ran: the runner's copy of the
# output (on the call's stream) takes what the tensor holds then, not the product
run adv_stream $KB/1_Square_matrix_multiplication_.py $ADV/non_default_stream_kernel.py $QC --shapes nominal
if [ $triton = 1 ]; then
	run sm_triton $D/softmax.py $G/softmax_triton.py $SM $QC
	run mm_triton $D/matmul.py $G/matmul_triton.py --dims N=257 $QC
	run ln_triton tasks/layernorm/baseline.py $G/layernorm_triton.py --dims B=2,F=3,D1=33,D2=65 $QC
	run conv_triton tasks/conv_relu_pool/baseline.py $G/conv_triton.py $QC
fi
wait
check 0 - "$tmp/sm_cuda.json" "softmax: CUDA ModelNew (online softmax), small shapes"
check 0 - "$tmp/mm_cuda.json" "matmul: CUDA ModelNew (tiled SGEMM), N=257"
check 0 - "$tmp/ln_cuda.json" "layernorm (the seed's torch baseline): CUDA ModelNew"
check 0 - "$tmp/ln_kb_cuda.json" "40_LayerNorm: CUDA ModelNew, its nn.LayerNorm's parameters bound by name"
check 0 - "$tmp/conv_cuda.json" "conv_relu_pool (the seed's torch baseline): CUDA ModelNew"
check 0 - "$tmp/gemm_cuda.json" "12_Gemm_Multiply_LeakyReLU: CUDA ModelNew (cuBLAS + a fused epilogue)"
check 0 - "$tmp/mlp_cuda.json" "1_MLP: CUDA ModelNew (cuBLAS + fused bias and ReLU)"
check 1 check.mismatch "$tmp/adv_reuse.json" "KernelBench result_reuse_kernel: rejected, check.mismatch"
check 1 check.input_modified "$tmp/adv_zero.json" "KernelBench zero_out_kernel: rejected, check.input_modified"
check 1 check.mismatch "$tmp/adv_stream.json" "KernelBench non_default_stream_kernel: rejected, check.mismatch"
if [ $triton = 1 ]; then
	check 0 - "$tmp/sm_triton.json" "softmax: Triton ModelNew, compiled in the warm-up"
	check 0 - "$tmp/mm_triton.json" "matmul: Triton ModelNew (tl.dot in IEEE fp32)"
	check 0 - "$tmp/ln_triton.json" "layernorm: Triton ModelNew (two-pass statistics)"
	check 0 - "$tmp/conv_triton.json" "conv_relu_pool: Triton ModelNew"
	ok "  the Triton build ran a JIT warm-up ahead of the run" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [c for c in d["checks"] if c["name"] == "jit-warmup" and c["status"] == "pass"], d["checks"]' "$tmp/sm_triton.json"
else
	echo "skip the Triton cases: kgate's torch has no Triton"
fi
# what a CUDA ModelNew's run was: the torch runner on the device, the keeper's span, batched calls
ok "  a CUDA ModelNew runs in run-torch-cuda, its build by nvcc" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert "nvcc" in d["compile_log"], d["compile_log"][-400:]
assert d["backend"] == "torch", d["backend"]' "$tmp/sm_cuda.json"

section "KernelBench problems at their own shapes (honest CUDA ModelNew; eager and torch.compile beside)"
# one at a time: each is timed; eager beside each, torch.compile beside the softmax (its compile takes
# tens of seconds a problem; the table times it beside each seed task)
KGATE_BASELINES=all "$KGATE" verify $KB/23_Softmax.py $G/softmax_cuda.py $QN --quiet --report "json:$tmp/kb_sm.json" >"$tmp/kb_sm.out" 2>&1
check 0 - "$tmp/kb_sm.json" "23_Softmax at 4096 x 393216: CUDA ModelNew accepted, eager and compile timed"
ok "  eager and torch.compile were timed in the same run, the quoted one named" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
b = {x["name"]: x for x in d["baselines"]}
assert b["eager"]["timed"] and b["compile"]["timed"] and b["reference"]["timed"], b
assert d["best_baseline"] in ("eager", "compile"), d["best_baseline"]
assert "kgate-device" in b["eager"]["how"], b["eager"]' "$tmp/kb_sm.json"
for pair in "kb_mm:1_Square_matrix_multiplication_.py:matmul_cuda.py" "kb_ln:40_LayerNorm.py:layernorm_kb_cuda.py" \
	"kb_gemm:12_Gemm_Multiply_LeakyReLU.py:gemm_leaky_cuda.py" "kb_mlp:1_MLP.py:mlp_cuda.py"; do
	l=${pair%%:*} rest=${pair#*:}
	p=${rest%%:*} c=${rest#*:}
	KGATE_BASELINES=eager "$KGATE" verify $KB/$p $G/$c $QN --quiet --report "json:$tmp/$l.json" >"$tmp/$l.out" 2>&1
	check 0 - "$tmp/$l.json" "$p at its own shapes: $c accepted"
done
if [ $triton = 1 ]; then
	KGATE_BASELINES=eager "$KGATE" verify $KB/23_Softmax.py $G/softmax_triton.py $QN --quiet --report "json:$tmp/kb_smt.json" >"$tmp/kb_smt.out" 2>&1
	check 0 - "$tmp/kb_smt.json" "23_Softmax at 4096 x 393216: Triton ModelNew accepted"
fi

if [ "${KB35_TABLE:-1}" != 0 ]; then
	section "the seed table (bench/table35.sh)"
	sh bench/table35.sh
	trc=$?
	ok "the seed table measured every row" [ $trc -eq 0 ]
fi
section "done"
finish
