#!/bin/sh
# Integration: `kgate search --agent replay` over a directory of given candidates (gating code
# that already exists): the honest one wins, the others are recorded with their reasons; a second
# run resumes without redoing anything; a run killed mid-round resumes from the saved proposals
# and verifies only what was not finished; the in-process isolation mode gives the same result.
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
need_verifier
R="--agent replay --agent-opt dir=$CANDS --rounds 3 --branch 2 --candidates 2"

out="$tmp/replay"
"$KGATE" search softmax $R --out "$out" $P >"$tmp/r1.out" 2>&1
rc=$?
ok "replay: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/r1.out" | sed 's/^/     | /'
ok "replay: the honest candidate is the winner" cmp -s "$out/winner.c" "$CANDS/honest.c"
ok "replay: all four verified" is_true "$(hist "$out" 'len(c) == 4')"
ok "replay: broken -> compile.error" is_true "$(hist "$out" '"compile.error" in codes("broken")')"
ok "replay: hostile ones rejected" is_true "$(hist "$out" 'verdict("hostile_zero") == verdict("hostile_socket") == ["rejected"]')"
ok "replay: the file names are kept" is_true "$(hist "$out" 'sorted(e["name"] for e in c) == ["broken.c", "honest.c", "hostile_socket.c", "hostile_zero.c"]')"
ok "replay: stops when the directory is exhausted" grep -q "nothing more to propose" "$tmp/r1.out"
# a candidate line carries the report's own objects, unchanged (docs/report.md)
ok "replay: history lines hold the report's verdict, reasons and timing as they are" is_true "$(hist "$out" '(all(
    all(e.get(k) == json.load(open(sys.argv[1] + "/" + e["report"])).get(k) for k in
        ("verdict", "exit_code", "reasons", "timing", "compile_log", "error")) for e in c)
    and any("median_ms" in e.get("timing", {}).get("candidate", {}) for e in c))')"
ok "replay: winner.json has the winner's timing as its report has it" is_true "$(python3 -c 'import json,sys
w = json.load(open(sys.argv[1] + "/winner.json"))
print(w["timing"] == w["full_report"]["timing"] and w["timing"]["speedup"] > 0)' "$out")"

# resumed: nothing to do, same winner, same history
"$KGATE" search softmax $R --out "$out" $P >"$tmp/r2.out" 2>&1
rc=$?
ok "resume: exit 0 (got $rc)" [ $rc -eq 0 ]
ok "resume: round 1 not redone" grep -q "round 1: done in an earlier run" "$tmp/r2.out"
ok "resume: nothing verified again" is_true "$(hist "$out" 'len(c) == 4')"

# killed in the middle of round 1, then resumed
out="$tmp/killed"
"$KGATE" search softmax $R --jobs 1 --out "$out" $P >"$tmp/k1.out" 2>&1 &
pid=$!
for _ in $(seq 600); do
	[ "$(hist "$out" 'len(c)' 2>/dev/null)" = "1" ] && break
	sleep 0.1
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
n1=$(hist "$out" 'len(c)')
ok "killed: stopped part-way (verified $n1 of 4)" [ "$n1" -ge 1 ] && [ "$n1" -lt 4 ]
"$KGATE" search softmax $R --jobs 1 --out "$out" $P >"$tmp/k2.out" 2>&1
rc=$?
ok "killed: resumed to exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/k2.out" | sed 's/^/     | /'
ok "killed: resumed from the saved proposals" grep -q "round 1: resuming with the 4 proposals saved" "$tmp/k2.out"
ok "killed: only the unfinished ones verified ($n1 already)" grep -q "$((4 - n1)) to verify ($n1 already verified)" "$tmp/k2.out"
ok "killed: each candidate verified once" is_true "$(hist "$out" 'len(c) == 4 and len({e["id"] for e in c}) == 4')"
ok "killed: same winner" cmp -s "$out/winner.c" "$CANDS/honest.c"

# in-process plugin, agent settings from a YAML file
printf 'dir: %s\n' "$CANDS" >"$tmp/replay.yaml"
"$KGATE" search softmax --agent replay --agent-config "$tmp/replay.yaml" --agent-isolation inproc --rounds 1 \
	--branch 2 --candidates 2 --out "$tmp/inproc" $P >"$tmp/i.out" 2>&1
rc=$?
ok "inproc + config file: exit 0 (got $rc)" [ $rc -eq 0 ]
ok "inproc + config file: same winner" cmp -s "$tmp/inproc/winner.c" "$CANDS/honest.c"
finish
