#!/bin/sh
# Integration: `kgate search --agent tuner --template FILE` on the CPU example templates: every
# setting is an ordinary candidate through the full verifier (its label is the idea text, the
# generated source names it on its first line); a space within the budget is walked as a grid
# and then the tuner has nothing more to propose; the same --seed proposes the same settings;
# a malformed directive is a usage error naming file:line; no template is a usage error too.
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
need_verifier

# random sampling, then successive halving (16 settings, 8 verified)
out="$tmp/softmax"
"$KGATE" search softmax --agent tuner --template examples/tuner/softmax.c --rounds 2 --branch 2 --candidates 2 \
	--seed 7 --retime 2 --out "$out" $P >"$tmp/s1.out" 2>&1
rc=$?
ok "tuner softmax: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/s1.out" | sed 's/^/     | /'
ok "tuner softmax: 8 distinct settings verified" is_true "$(hist "$out" 'len(c) == 8 and len({e["idea_text"] for e in c}) == 8')"
ok "tuner softmax: every idea is a full setting" is_true "$(hist "$out" 'all(__import__("re").fullmatch(r"ACC=\d+ BLOCK=\d+", e["idea_text"]) for e in c)')"
ok "tuner softmax: every setting accepted" is_true "$(hist "$out" 'all(e["verdict"] == "accepted" for e in c)')"
ok "tuner softmax: the winner is a generated source naming its setting" grep -Eq '^/\* kgate:tuned ACC=[0-9]+ BLOCK=[0-9]+ \*/$' "$out/winner.c"
ok "tuner softmax: round 2 explores around the best" grep -q "successive halving around the best settings" "$tmp/s1.out"

# same seed, same first-round proposals
"$KGATE" search softmax --agent tuner --template examples/tuner/softmax.c --rounds 1 --branch 2 --candidates 2 \
	--seed 7 --finalists 0 --out "$tmp/again" $P >"$tmp/s2.out" 2>&1
first() { hist "$1" 'sorted(e["idea_text"] for e in c if e["round"] == 1)'; }
ok "tuner: the same --seed proposes the same settings" [ "$(first "$out")" = "$(first "$tmp/again")" ]
"$KGATE" search softmax --agent tuner --template examples/tuner/softmax.c --rounds 1 --branch 2 --candidates 2 \
	--seed 8 --finalists 0 --out "$tmp/other" $P >"$tmp/s3.out" 2>&1
ok "tuner: another --seed proposes other settings" [ "$(first "$out")" != "$(first "$tmp/other")" ]

# a small space is a grid: 12 settings in 3 rounds of 4, then nothing more
out="$tmp/matmul"
"$KGATE" search matmul --agent tuner --template examples/tuner/matmul.c --rounds 5 --branch 2 --candidates 2 --finalists 0 \
	--out "$out" $P >"$tmp/m.out" 2>&1
rc=$?
ok "tuner matmul grid: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/m.out" | sed 's/^/     | /'
ok "tuner matmul grid: walked as a grid" grep -q "the space is walked as a grid" "$tmp/m.out"
ok "tuner matmul grid: all 12 settings, each once" is_true "$(hist "$out" 'len(c) == 12 and len({e["idea_text"] for e in c}) == 12')"
ok "tuner matmul grid: stops when the grid is done" grep -q "round 4: the agent has nothing more to propose" "$tmp/m.out"

# malformed directives: file:line, exit 2, before anything is verified
printf '#include <kgate/kernel.h>\n/* kgate:tune A = {1, 2} */\n/* kgate:tune B = {4, 4} */\n' >"$tmp/bad.c"
"$KGATE" search softmax --agent tuner --template "$tmp/bad.c" --out "$tmp/bad" $P >"$tmp/b.out" 2>&1
rc=$?
ok "malformed template: exit 2 (got $rc)" [ $rc -eq 2 ]
ok "malformed template: file and line named" grep -q "bad.c:3: B: value 4 listed twice" "$tmp/b.out"
ok "malformed template: nothing verified" [ ! -s "$tmp/bad/history.jsonl" ]
"$KGATE" search softmax --agent tuner --out "$tmp/none" $P >"$tmp/n.out" 2>&1
rc=$?
ok "no template: exit 2 (got $rc)" [ $rc -eq 2 ]
ok "no template: says how to give one" grep -q -- "--template FILE" "$tmp/n.out"
"$KGATE" search softmax --agent tuner --template "$tmp/missing.c" --out "$tmp/missing" $P >"$tmp/x.out" 2>&1
rc=$?
ok "missing template: exit 2 (got $rc)" [ $rc -eq 2 ]
finish
