#!/bin/sh
# Integration: the command line fails fast and says why. Unknown options and arguments are exit 2
# everywhere; report specs and paths are checked before any work; -q never hides an error;
# --report json:- puts nothing but JSON on stdout; kgate validate checks a file without running;
# kgate tasks --json; KGATE_POLICY; the heartbeat when stderr is not a terminal; --seed -1 and
# --keep (kgate 0.1: exit 0 for `tasks --bogus`/`doctor --bogus`, a bad report found after the whole
# run, -q hiding exit 3, the summary mixed into JSON on stdout, --keep silent).
set -u
. tests/integration/lib.sh
C=examples/softmax/online.c
P="--policy policy/ci.yaml --iterations 0"

usage() { # usage DESCRIPTION ARGS...: exit 2 with a message on stderr, nothing on stdout
	what=$1; shift
	"$KGATE" "$@" >"$tmp/o" 2>"$tmp/e"
	rc=$?
	ok "$what: exit 2 (got $rc)" [ $rc -eq 2 ]
	ok "$what: says why on stderr" [ -s "$tmp/e" ]
}
usage "doctor --bogus" doctor --bogus
usage "doctor with an argument" doctor extra
usage "tasks --bogus" tasks --bogus
usage "version --bogus" version --bogus
usage "help with an argument" help bogus
usage "verify --bogus" verify softmax $C --bogus
usage "verify with an extra argument" verify softmax $C extra
usage "validate --bogus" validate --bogus
usage "validate without a file" validate
usage "unknown command" bogus
usage "--seed -1" verify softmax $C --seed -1
usage "--seed with a space" verify softmax $C --seed " 5"
usage "--trials -2" verify softmax $C --trials -2

# report specs and paths: exit 2 before anything is compiled (kgate 0.1: exit 3 after the run)
usage "--report xml:o.xml" verify softmax $C $P --report xml:"$tmp/o.xml"
ok "--report xml: names the formats" grep -q "json, sarif, junit, text" "$tmp/e"
ok "--report xml: nothing ran" sh -c '! grep -q "compil" "$1"' _ "$tmp/e"
usage "--report into a missing directory" verify softmax $C $P --report json:"$tmp/nodir/r.json"
usage "--report onto a directory" verify softmax $C $P --report json:"$tmp"
usage "--report without a path" verify softmax $C $P --report json:
usage "two reports on stdout" verify softmax $C $P --report json:- --report sarif:-
if [ "$(id -u)" -ne 0 ]; then
	mkdir -p "$tmp/ro" && chmod 555 "$tmp/ro"
	usage "--report into a read-only directory" verify softmax $C $P --report json:"$tmp/ro/r.json"
fi

# --report json:- is the only thing on stdout, and parses
"$KGATE" verify softmax $C $P --report json:- >"$tmp/stdout.json" 2>"$tmp/stderr"
rc=$?
ok "json:- exit 0 (got $rc)" [ $rc -eq 0 ]
ok "json:- stdout is one JSON document" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["verdict"]=="accepted"' "$tmp/stdout.json"
ok "json:- the summary went to stderr" grep -q "verdict: ACCEPTED" "$tmp/stderr"

# -q never hides an error (an exit 3: a .cu without a GPU)
if ! "$KGATE" doctor --gpu >/dev/null 2>&1; then
	"$KGATE" verify softmax examples/cuda/softmax/online.cu --policy ci -q >"$tmp/o" 2>"$tmp/e"
	rc=$?
	ok "-q, exit 3 (got $rc)" [ $rc -eq 3 ]
	ok "-q still says why on stderr" grep -q "not verified" "$tmp/e"
fi
"$KGATE" verify softmax $tmp/missing.c -q >"$tmp/o" 2>"$tmp/e"
ok "-q, a usage error still says why" grep -q "missing.c" "$tmp/e"

# kgate validate
"$KGATE" validate tasks/softmax/task.yaml policy/ci.yaml policy/strict.yaml >"$tmp/o" 2>&1
rc=$?
ok "validate good files: exit 0 (got $rc)" [ $rc -eq 0 ]
ok "validate names a task and a policy" sh -c 'grep -q "task softmax" "$1" && grep -q "policy" "$1"' _ "$tmp/o"
printf 'kgate_policy: 1\ntrials: 0\n' >"$tmp/bad.yaml"
"$KGATE" validate "$tmp/bad.yaml" >"$tmp/o" 2>&1
rc=$?
ok "validate a bad policy: exit 2 (got $rc)" [ $rc -eq 2 ]
ok "validate a bad policy: file:line" grep -q "bad.yaml:2" "$tmp/o"
printf 'name: x\n' >"$tmp/neither.yaml"
"$KGATE" validate "$tmp/neither.yaml" >"$tmp/o" 2>&1
ok "validate neither task nor policy: exit 2" [ $? -eq 2 ]

# kgate tasks --json
"$KGATE" tasks --json >"$tmp/tasks.json" 2>"$tmp/e"
ok "tasks --json parses and lists softmax" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
t = {x["name"]: x for x in d}
assert t["softmax"]["valid"] and t["softmax"]["path"].endswith("task.yaml"), t
assert "nominal" in t["softmax"]["shapes"], t["softmax"]' "$tmp/tasks.json"

# KGATE_POLICY: the default when --policy is not given; a bad one is exit 2
KGATE_POLICY=policy/ci.yaml "$KGATE" verify softmax $C --iterations 0 --report json:- >"$tmp/env.json" 2>/dev/null
ok "KGATE_POLICY is used" python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["policy"].endswith("ci.yaml")' "$tmp/env.json"
KGATE_POLICY=nonexistent "$KGATE" verify softmax $C --iterations 0 -q >/dev/null 2>"$tmp/e"
ok "KGATE_POLICY unknown: exit 2" [ $? -eq 2 ]

# heartbeat: stderr is a file here, so lines with phase and estimate come without --progress
"$KGATE" verify softmax $C --policy policy/ci.yaml --iterations 20 --heartbeat 1 >/dev/null 2>"$tmp/hb"
ok "heartbeat lines on stderr" grep -q '^\[kgate\] softmax: .* s elapsed' "$tmp/hb"
ok "heartbeat: no terminal escapes in a file" sh -c '! grep -q "$(printf "\033")" "$1"' _ "$tmp/hb"

# --keep prints the kept directory, and it exists
"$KGATE" verify softmax $C $P --keep -q >/dev/null 2>"$tmp/keep"
kept=$(sed -n 's/.*work directory kept: //p' "$tmp/keep")
ok "--keep names the directory ($kept)" [ -n "$kept" ] && [ -d "$kept" ]
# the session directory around it (the CLI's, see cli/supervise.c) goes with it
case "$(dirname "$kept")" in */kgate-*) rm -rf "$(dirname "$kept")" ;; *) rm -rf "$kept" ;; esac
finish
