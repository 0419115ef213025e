#!/bin/sh
# Integration: reports a CI consumes as they are, whatever the candidate prints. The hostile
# examples/hostile/report_injection.c puts terminal escapes, a carriage return and invalid UTF-8
# into its compile log and into the name of a symbol it imports (kgate 0.1: empty JSON/SARIF
# reasons, broken JUnit XML, a fake "verdict: ACCEPTED" painted on the terminal), and invisible
# characters: a right-to-left override, an isolate, a zero-width space, a line separator, a BOM, a
# soft hyphen (kgate 0.2: passed through raw, "DETPECCA" shown as "ACCEPTED"). Every report must
# parse, keep its reasons, hold no raw control byte and no raw format character (Unicode Cf, Zl,
# Zp: each shown as \uNNNN) while plain "café" stays as it is; the JUnit XML follows the rules of the common
# JUnit.xsd (checked here rule by rule; with $KGATE_JUNIT_XSD and xmllint, against the file too);
# SARIF locations are relative to --source-root, compile errors at the compiler's line and column.
set -u
. tests/integration/lib.sh
d="$tmp/inj"
mkdir -p "$d"
"$KGATE" verify softmax examples/hostile/report_injection.c --policy policy/ci.yaml --iterations 0 \
	--source-root "$(pwd)" --report json:"$d/r.json" --report sarif:"$d/r.sarif" --report junit:"$d/r.xml" \
	--report text:"$d/r.txt" >"$d/stdout" 2>"$d/stderr"
rc=$?
ok "report injection: exit 1 (got $rc)" [ $rc -eq 1 ]
python3 - "$d" <<'PY' || failures=$((failures + 1))
import json, sys, unicodedata, xml.etree.ElementTree as ET
d = sys.argv[1]
def raw_controls(b):
    return [c for c in b if (c < 0x20 and c not in (9, 10)) or c == 0x7f]
def raw_invisible(t):
    return ["U+%04X" % ord(c) for c in t if unicodedata.category(c) in ("Cf", "Zl", "Zp")]
def strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from strings(v)
r = json.load(open(f"{d}/r.json", encoding="utf-8"))
codes = [x["code"] for x in r["reasons"]]
assert r["verdict"] == "rejected" and "static.forbidden_symbol" in codes, codes
msg = [x for x in r["reasons"] if x["code"] == "static.forbidden_symbol"][0]["message"]
assert "\\x1b[1A" in msg and "\\xff\\xfe" in msg and "\\x0d" in msg, msg
assert not raw_controls(msg.encode()), msg
assert "\\x1b" in r["compile_log"] and not raw_controls(r["compile_log"].encode()), r["compile_log"]
assert "kg\\u202e\\u200btesmem\\u2066" in msg, msg
log = r["compile_log"]
assert "\\u202eDETPECCA\\u2066" in log and "\\u2069\\u2028caf\u00e9 \\ufeff\\u00ad" in log, log
assert r.get("notes"), "no note that text was escaped"
s = json.load(open(f"{d}/r.sarif", encoding="utf-8"))
run = s["runs"][0]
assert [x["ruleId"] for x in run["results"]] == codes, run["results"]
loc = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
assert loc == {"uri": "examples/hostile/report_injection.c", "uriBaseId": "SRCROOT"}, loc
assert run["originalUriBaseIds"]["SRCROOT"]["uri"].startswith("file:///"), run["originalUriBaseIds"]
for f in ("r.json", "r.sarif", "r.xml", "r.txt", "stdout", "stderr"):
    b = open(f"{d}/{f}", "rb").read()
    assert not raw_controls(b), (f, raw_controls(b)[:5])
    t = b.decode("utf-8")  # strict: raises on invalid UTF-8
    assert not raw_invisible(t), (f, raw_invisible(t)[:5])
    if f in ("r.xml", "r.txt", "stdout"):
        assert "\\u202e" in t, (f, "no visible \\u202e")
for f, doc in (("r.json", r), ("r.sarif", s)):  # each string as a consumer decodes it
    bad = [x for x in strings(doc) if raw_invisible(x)]
    assert not bad, (f, bad[:3])
assert "caf\u00e9" in ET.parse(f"{d}/r.xml").getroot().find("testsuite").find("system-out").text
out = open(f"{d}/stdout", encoding="utf-8").read()
assert not any(l.startswith("verdict: ACCEPTED") for l in out.splitlines()), out
assert "verdict: REJECTED (exit 1)" in out, out
root = ET.parse(f"{d}/r.xml").getroot()
print("ok   json, sarif, junit, text and the terminal hold the hostile bytes escaped:", codes)
PY
checked=$((checked + 1))

# JUnit.xsd, rule by rule: testsuites/testsuite with name, package, id, timestamp (no zone),
# hostname, tests, failures, errors, time; properties first, then testcases (name, classname, time;
# at most one of skipped/error/failure, error and failure with a type), then system-out, system-err
junit_rules() {
	python3 - "$1" <<'PY'
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
for i, ts in enumerate(root):
    assert ts.tag == "testsuite"
    for a in ("name", "package", "id", "timestamp", "hostname", "tests", "failures", "errors", "time"):
        assert ts.get(a), f"testsuite lacks {a}"
    assert ts.get("id") == str(i)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", ts.get("timestamp")), ts.get("timestamp")
    for a in ("tests", "failures", "errors") + (("skipped",) if ts.get("skipped") else ()):
        int(ts.get(a))
    float(ts.get("time"))
    kids = [k.tag for k in ts]
    assert kids[0] == "properties" and kids[-2:] == ["system-out", "system-err"], kids
    assert all(k == "testcase" for k in kids[1:-2]), kids
    for p in ts.find("properties"):
        assert p.tag == "property" and p.get("name") and p.get("value") is not None
    cases = ts.findall("testcase")
    assert int(ts.get("tests")) == len(cases)
    assert int(ts.get("failures")) == sum(c.find("failure") is not None for c in cases)
    assert int(ts.get("errors")) == sum(c.find("error") is not None for c in cases)
    for c in cases:
        assert c.get("name") and c.get("classname") and c.get("time") is not None
        float(c.get("time"))
        assert len(list(c)) <= 1 and all(k.tag in ("skipped", "error", "failure") for k in c), list(c)
        for k in c:
            if k.tag != "skipped":
                assert k.get("type"), f"{k.tag} without a type"
PY
}
ok "junit (rejected) follows JUnit.xsd" junit_rules "$d/r.xml"
ok "junit: the compile log is in system-out" python3 -c '
import sys, xml.etree.ElementTree as ET
t = ET.parse(sys.argv[1]).getroot().find("testsuite").find("system-out").text
assert "compile log" in t and "pragma message" in t, t' "$d/r.xml"

# a compile error: SARIF at the compiler's own line and column, the log attached; JUnit still valid
"$KGATE" verify softmax examples/broken/syntax_error.c --policy policy/ci.yaml --iterations 0 -q \
	--source-root "$(pwd)" --report sarif:"$d/c.sarif" --report junit:"$d/c.xml" --report json:"$d/c.json"
want=$(python3 -c 'import json,re,sys
log = json.load(open(sys.argv[1]))["compile_log"]
m = re.search(r"kernel\.c:(\d+):(\d+): error", log); print(m.group(1), m.group(2))' "$d/c.json")
ok "sarif: compile.error at the compiler's line and column ($want)" python3 -c '
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
res = [r for r in run["results"] if r["ruleId"] == "compile.error"]
reg = res[0]["locations"][0]["physicalLocation"]["region"]
assert "%d %d" % (reg["startLine"], reg["startColumn"]) == sys.argv[2], reg
assert res[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "examples/broken/syntax_error.c"
assert "error" in run["properties"]["compile_log"]
assert run["invocations"][0]["toolExecutionNotifications"][0]["descriptor"]["id"] == "compile-log"' "$d/c.sarif" "$want"
ok "junit (compile error) follows JUnit.xsd" junit_rules "$d/c.xml"
# accepted and not-verified runs too
"$KGATE" verify softmax examples/softmax/online.c --policy policy/ci.yaml --iterations 0 -q --report junit:"$d/a.xml"
ok "junit (accepted) follows JUnit.xsd" junit_rules "$d/a.xml"
if [ -n "${KGATE_JUNIT_XSD:-}" ] && command -v xmllint >/dev/null 2>&1; then
	for x in "$d/r.xml" "$d/c.xml" "$d/a.xml"; do
		ok "xmllint --schema JUnit.xsd $(basename "$x")" xmllint --noout --schema "$KGATE_JUNIT_XSD" "$x"
	done
fi
finish
