#!/bin/sh
# Integration: one run of the real binary writes every report format at once (--report given
# several times); each must parse (JSON, SARIF 2.1.0 structure, JUnit XML) and agree on the verdict.
set -u
. tests/integration/lib.sh
d="$tmp/reports"
mkdir -p "$d"
"$KGATE" verify softmax examples/hostile/zero_inputs.c --policy policy/ci.yaml --iterations 0 --quiet \
	--report json:"$d/r.json" --report sarif:"$d/r.sarif" --report junit:"$d/r.xml" --report text:"$d/r.txt"
rc=$?
checked=$((checked + 1))
if [ $rc -ne 1 ]; then
	failures=$((failures + 1))
	echo "FAIL exit $rc, want 1"
fi
python3 - "$d" <<'PY' || failures=$((failures + 1))
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
r = json.load(open(f"{d}/r.json"))
assert r["verdict"] == "rejected" and r["exit_code"] == 1, r["verdict"]
codes = {x["code"] for x in r["reasons"]}
assert "sandbox.crash" in codes, codes  # a store into its read-only input faults
s = json.load(open(f"{d}/r.sarif"))
assert s["version"] == "2.1.0"
run = s["runs"][0]
assert run["tool"]["driver"]["name"] == "kgate"
rules = {x["id"] for x in run["tool"]["driver"]["rules"]}
assert rules == codes, (rules, codes)
assert len(run["results"]) == len(r["reasons"])
for res in run["results"]:
    assert res["level"] == "error" and res["ruleId"] in rules
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("zero_inputs.c")
suite = ET.parse(f"{d}/r.xml").getroot().find("testsuite")
cases = suite.findall("testcase")
assert int(suite.get("tests")) == len(cases) == len(r["checks"]), (suite.get("tests"), len(cases))
failed = [c.get("name") for c in cases if c.find("failure") is not None]
assert failed == ["correctness"], failed
text = open(f"{d}/r.txt").read()
assert "verdict: REJECTED (exit 1)" in text and "sandbox.crash" in text
print("ok   json, sarif, junit and text agree:", sorted(codes))
PY

# A rejection fits a screen: the terminal summary folds a finding repeated at every shape and class
# into its first instance and one count line (the passthrough: 18 reasons, 63 lines of them before
# the grouping), while the JSON report keeps each reason. Every distinct code still shows in full.
g="$tmp/grouped"
mkdir -p "$g"
"$KGATE" verify softmax examples/hostile/passthrough.c --policy policy/ci.yaml --iterations 0 \
	--report json:"$g/r.json" >"$g/out" 2>&1
rc=$?
ok "repeats grouped in the summary (exit $rc), every reason in the JSON" python3 - "$g" "$rc" <<'PY'
import json, sys
g = sys.argv[1]
assert sys.argv[2] == "1", sys.argv[2]
out = open(f"{g}/out").read()
r = json.load(open(f"{g}/r.json"))
codes = [x["code"] for x in r["reasons"]]
shown = [l.split()[1] for l in out.splitlines() if l.startswith("  x ")]
assert set(shown) == set(codes), (shown, codes)
assert len(shown) < len(codes) and "more like it" in out, (len(shown), len(codes))
assert "every one in the JSON report" in out, out
lines = out[out.index("\nverdict: "):out.index("\nchecks:")].count("\n") - 1
assert lines <= 25, (lines, out)
PY

# Work that did not run is never a PASS: the trusted reference fails (exit 3) before the first
# trial, or at the first variant shape after the base shape's trials; correctness is SKIP, "not
# run" or "incomplete", in every format, and timing does not blame the candidate (kgate 0.2:
# "PASS correctness 0 trials over 9 shapes", "SKIP timing: the candidate failed its checks").
for at in 1000 1; do
	t="$tmp/badref-$at"
	mkdir -p "$t"
	grep -v 'cuda: reference.cu' tasks/softmax/task.yaml >"$t/task.yaml"
	cp tasks/softmax/baseline.py "$t/"
	sed "s/^	if (n_in != 1 || n_out != 1/	if (in[0].shape[1] == $at)\n		return -5;\n&/" tasks/softmax/reference.c \
		>"$t/reference.c"
	"$KGATE" verify "$t/task.yaml" examples/softmax/online.c --policy policy/ci.yaml --iterations 5 \
		--report json:"$t/r.json" --report junit:"$t/r.xml" >"$t/out" 2>&1
	rc=$?
	ok "reference failing at C=$at: exit 3 (got $rc), no PASS for what did not run" python3 - "$t" "$at" <<'PY'
import json, sys, xml.etree.ElementTree as ET
t, at = sys.argv[1], sys.argv[2]
out = open(f"{t}/out").read()
assert "verdict: NOT VERIFIED (exit 3)" in out and "the reference returned -5" in out, out
assert "PASS correctness" not in out and "PASS timing" not in out, out
assert "SKIP correctness" in out and ("not run: 0 of" if at == "1000" else "incomplete: ") in out, out
assert "the candidate failed its checks" not in out, out
r = json.load(open(f"{t}/r.json"))
st = {c["name"]: c["status"] for c in r["checks"]}
assert st["correctness"] == "skip" and st["timing"] == "skip" and st["compile"] == "pass", st
cases = {c.get("name"): c for c in ET.parse(f"{t}/r.xml").getroot().find("testsuite").findall("testcase")}
assert cases["correctness"].find("skipped") is not None, ET.tostring(cases["correctness"])
PY
done
finish
