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
assert "check.input_modified" in codes, codes
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
assert "verdict: REJECTED (exit 1)" in text and "check.input_modified" in text
print("ok   json, sarif, junit and text agree:", sorted(codes))
PY
finish
