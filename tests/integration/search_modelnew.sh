#!/bin/sh
# Integration: `kgate search` over a task given as a KernelBench module (PROBLEM.py --dims) with
# ModelNew candidates: the replay agent's .py files under --backend torch (the honest module wins
# as winner.py, the one returning memory it never wrote is rejected, the dims are recorded and a
# resume with others refused); a .py proposed beside a .c one without --backend (verified as torch
# and as C, each by its own backend); and an LLM agent whose prompts ask for ModelNew, answered by
# the fake server with python-fenced modules that are verified. Skipped where no Python with torch
# is found, as the torch tasks are.
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
need_torch
Q="--policy ci --iterations 3 --finalists 0"

mn() { # mn OUTDIR PYTHON-EXPRESSION over c (candidate lines), meta (search.json), byname(FILE)
	python3 - "$1" "$2" <<'PY'
import json, sys
out = sys.argv[1]
ev = [json.loads(l) for l in open(out + "/history.jsonl")]
c = [e for e in ev if e.get("event") == "candidate"]
meta = json.load(open(out + "/search.json"))
def byname(path):
    """the candidate lines of the source in PATH (by its SHA-256)"""
    import hashlib
    h = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return [e for e in c if e["id"] == h]
print(eval("(" + sys.argv[2] + ")"))  # parenthesised: an expression may span lines
PY
}

# replay, --backend torch: two ModelNew modules, one honest, one returning torch.empty_like
mkdir -p "$tmp/mods"
cp $C/softmax_modelnew.py $C/softmax_empty.py "$tmp/mods/"
out="$tmp/replay"
"$KGATE" search $D/softmax.py $SM --backend torch --agent replay --agent-opt dir="$tmp/mods" --rounds 1 \
	--out "$out" $Q >"$tmp/r.out" 2>&1
rc=$?
ok "replay torch: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/r.out" | sed 's/^/     | /'
ok "replay torch: the honest ModelNew is the winner, as winner.py" cmp -s "$out/winner.py" $C/softmax_modelnew.py
ok "replay torch: winner.json names winner.py" is_true "$(mn "$out" 'json.load(open(out + "/winner.json"))["winner"] == "winner.py"')"
ok "replay torch: both verified as torch, stored as candidates/<sha>.py" is_true "$(mn "$out" 'len(c) == 2 and all(
    e["language"] == "torch" and e["file"] == "candidates/%s.py" % e["id"] for e in c)')"
ok "replay torch: the unwritten output is rejected (check.mismatch)" is_true "$(mn "$out" '[e["verdict"] for e in
    byname("'$C/softmax_empty.py'")] == ["rejected"] and "check.mismatch" in
    [r["code"] for r in byname("'$C/softmax_empty.py'")[0]["reasons"]]')"
ok "replay torch: search.json records the module task, torch and the dims" is_true "$(mn "$out" 'meta["task"] == "softmax"
    and meta["backend"] == "torch" and meta["dims"] == "batch_size=4,features=64"')"
"$KGATE" search $D/softmax.py --dims batch_size=8,features=64 --backend torch --agent replay \
	--agent-opt dir="$tmp/mods" --rounds 1 --out "$out" $Q >"$tmp/r2.out" 2>&1
rc=$?
ok "replay torch: resumed with other dims: exit 2 (got $rc), said why" sh -c \
	'[ $0 -eq 2 ] && grep -q "holds a search for task softmax (torch, --dims batch_size=4,features=64)" "$1"' $rc "$tmp/r2.out"
"$KGATE" search softmax --backend torch --agent replay --agent-opt dir="$tmp/mods" --rounds 1 \
	--out "$tmp/notmod" $Q >"$tmp/r3.out" 2>&1
rc=$?
ok "replay torch for a manifest task: exit 2 (got $rc)" sh -c \
	'[ $0 -eq 2 ] && grep -q "needs a task given as a PyTorch module" "$1"' $rc "$tmp/r3.out"

# no --backend (cpu here): the .py is still a ModelNew, the .c a C candidate
mkdir -p "$tmp/mixed"
cp $C/softmax_modelnew.py $C/softmax_zero.c "$tmp/mixed/"
out="$tmp/mixed-out"
"$KGATE" search $D/softmax.py $SM --agent replay --agent-opt dir="$tmp/mixed" --rounds 1 --out "$out" $Q \
	>"$tmp/m.out" 2>&1
rc=$?
ok "mixed: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/m.out" | sed 's/^/     | /'
ok "mixed: each verified as its own backend" is_true "$(mn "$out" 'sorted((e["name"], e["language"],
    e["file"].rsplit(".", 1)[1]) for e in c) == [("softmax_modelnew.py", "torch", "py"), ("softmax_zero.c", "c", "c")]')"
ok "mixed: the ModelNew wins, as winner.py" cmp -s "$out/winner.py" $C/softmax_modelnew.py
ok "mixed: the search's backend is the default" is_true "$(mn "$out" 'meta["backend"] == "cpu"')"

# an LLM agent asked for ModelNew modules: the fake server answers python-fenced ones
mkdir -p "$tmp/prompts"
start_server --modules $C --dump-prompts "$tmp/prompts"
out="$tmp/llm"
OPENAI_API_KEY=sk-test KGATE_MODEL=fake-model "$KGATE" search $D/softmax.py $SM --backend torch --agent openai \
	--agent-opt base_url=http://127.0.0.1:$port/v1 --rounds 1 --branch 2 --candidates 1 --out "$out" $Q \
	>"$tmp/l.out" 2>&1
rc=$?
ok "llm: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/l.out" | sed 's/^/     | /'
ok "llm: every prompt asked for ModelNew (ideas + 2 ideas)" is_true "$(stats "s['modelnew_prompts'] == 3 and s['requests']['openai'] == 3")"
ok "llm: the prompts show the Model module and no C ABI" sh -c \
	'grep -q "class Model(nn.Module)" "$0"/openai-002.txt && grep -q "state_dict order and shapes" "$0"/openai-002.txt &&
	 ! grep -q "kg_forward" "$0"/openai-002.txt' "$tmp/prompts"
ok "llm: both modules verified as torch" is_true "$(mn "$out" 'len(c) == 2 and {e["language"] for e in c} == {"torch"}')"
ok "llm: the honest ModelNew is the winner" cmp -s "$out/winner.py" $C/softmax_modelnew.py
ok "llm: the unwritten output is rejected" is_true "$(mn "$out" '[e["verdict"] for e in
    byname("'$C/softmax_empty.py'")] == ["rejected"]')"
stop_server
finish
