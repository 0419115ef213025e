#!/bin/sh
# Integration: a winner that is not noise. A replay search over eight copies of one source verifies
# it once (the copies are recorded as duplicates sharing its result); a search over three sources
# that differ only in comments and layout (one kernel, three hashes) re-times the three finalists
# interleaved, records each one's samples and interval, and names a winner only as the intervals
# allow: overlapping intervals are "no significant difference" and the earliest of them is kept.
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
need_verifier

mkdir -p "$tmp/copies" "$tmp/variants"
for i in 1 2 3 4 5 6 7 8; do cp "$CANDS/honest.c" "$tmp/copies/copy-$i.c"; done
out="$tmp/copies-out"
"$KGATE" search softmax --agent replay --agent-opt dir="$tmp/copies" --rounds 3 --branch 2 --candidates 2 \
	--finalists 3 --retime 3 --out "$out" $P >"$tmp/c.out" 2>&1
rc=$?
ok "copies: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/c.out" | sed 's/^/     | /'
ok "copies: one verification for eight copies" is_true "$(hist "$out" 'len(c) == 1')"
ok "copies: the seven others recorded as duplicates of it" is_true "$(hist "$out" '(sorted(e["name"] for e in ev if e["event"] == "duplicate") == ["copy-%d.c" % i for i in range(2, 9)] and {e["id"] for e in ev if e["event"] == "duplicate"} == {c[0]["id"]})')"
ok "copies: the summary says the result was shared" grep -q "7 proposals were identical to a source already verified" "$tmp/c.out"
ok "copies: the one finalist re-timed with an interval" is_true "$(python3 -c 'import json,sys
w = json.load(open(sys.argv[1] + "/winner.json"))["finalists"]
f = w["finalists"]
print(len(f) == 1 and f[0]["n"] + f[0]["dropped"] == 3 and (f[0]["n"] == 0 or f[0]["interval"][0] <= f[0]["median"] <= f[0]["interval"][1]))' "$out")"
ok "copies: the winner is the source" cmp -s "$out/winner.c" "$CANDS/honest.c"

# one kernel, three sources
cp "$CANDS/honest.c" "$tmp/variants/a.c"
{ echo "/* the same kernel, another comment */"; cat "$CANDS/honest.c"; } >"$tmp/variants/b.c"
{ cat "$CANDS/honest.c"; printf '\n\n'; } >"$tmp/variants/c.c"
out="$tmp/variants-out"
"$KGATE" search softmax --agent replay --agent-opt dir="$tmp/variants" --rounds 1 --branch 3 --candidates 1 \
	--finalists 3 --retime 5 --out "$out" $P >"$tmp/v.out" 2>&1
rc=$?
ok "variants: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/v.out" | sed 's/^/     | /'
ok "variants: three sources verified" is_true "$(hist "$out" 'len(c) == 3')"
ok "variants: re-timed interleaved, one at a time" grep -q "re-verifying 3 candidates 5 times each, interleaved, one at a time" "$tmp/v.out"
# The decision must follow from the recorded intervals, whichever way the measurements fell.
decision_follows() { # the recorded decision, recomputed from the recorded intervals
	python3 - "$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1] + "/history.jsonl") if l.strip()]
order = {e["id"]: k for k, e in enumerate(e for e in ev if e["event"] == "candidate")}
F = [e for e in ev if e["event"] == "finalists"][-1]
f = {x["id"]: x for x in F["finalists"]}
ok = [i for i in f if not f[i]["disqualified"] and f[i]["n"] > 0]
top = max(ok, key=lambda i: (f[i]["median"], -order[i]))
group = [i for i in ok if i == top or f[i]["interval"][1] >= f[top]["interval"][0]]
good = (F["winner"] == min(group, key=lambda i: order[i]) and F["significant"] == (len(group) == 1)
        and sorted(F["tied"]) == sorted(i for i in group if i != F["winner"])
        and all(x["interval"][0] <= x["median"] <= x["interval"][1] for x in F["finalists"] if x["n"]))
print("intervals:", ", ".join("%.8s %.3f [%.3f, %.3f]" % (i[:8], f[i]["median"], *f[i]["interval"]) for i in f),
      file=sys.stderr)
print(good)
PY
}
ok "variants: the decision follows from the intervals" is_true "$(decision_follows "$out")"
sig=$(hist "$out" '[e for e in ev if e["event"] == "finalists"][-1]["significant"]')
if [ "$sig" = "False" ]; then
	ok "variants: stated as no significant difference" grep -q "no significant difference from" "$tmp/v.out"
else
	ok "variants: a significant winner is stated as such" grep -q "faster than every other finalist beyond" "$tmp/v.out"
fi
ok "variants: the winner's interval is in the summary" grep -Eq "speedup [0-9.]+x \[[0-9.]+, [0-9.]+\] \([0-9]+% interval" "$tmp/v.out"
ok "variants: winner.json carries the finalists" is_true "$(python3 -c 'import json,sys
w = json.load(open(sys.argv[1] + "/winner.json"))
print(w["finalists"]["winner"] == w["id"] and len(w["finalists"]["finalists"]) == 3)' "$out")"
# resumed: the recorded decision stands, nothing is re-timed
"$KGATE" search softmax --agent replay --agent-opt dir="$tmp/variants" --rounds 1 --branch 3 --candidates 1 \
	--finalists 3 --retime 5 --out "$out" $P >"$tmp/v2.out" 2>&1
ok "variants: resumed without re-timing" grep -q "finalists: re-timed in an earlier run" "$tmp/v2.out"
ok "variants: one finalists line" is_true "$(hist "$out" 'len([e for e in ev if e["event"] == "finalists"]) == 1')"
finish
