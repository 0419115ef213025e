#!/bin/sh
# Integration: the pipeline examples in examples/ci/ work as written. The shell commands between
# the kgate-commands markers of the GitHub Actions workflow and of the GitLab job are taken out as
# they are and run, on the CPU backend, in a scratch repository whose "pull request" adds an honest
# and a hostile kernel: the job fails (the hostile one is rejected), every report is written and
# parses, the SARIF for code scanning is one run with repository-relative locations; with only the
# honest kernel the job passes. Also: kgate.pc lets the vendor-agent example build as it is.
set -u
. tests/integration/lib.sh
top=$(pwd)
K=$(cd "$(dirname "$KGATE")" && pwd)
mkdir -p "$tmp/bin"
ln -s "$K/kgate" "$tmp/bin/kgate"

# commands FILE: the marked block, dedented as YAML's block scalar would
commands() {
	python3 - "$1" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
b = next(i for i, l in enumerate(lines) if l.strip() == "# kgate-commands-begin")
e = next(i for i, l in enumerate(lines) if l.strip() == "# kgate-commands-end")
ind = len(lines[b]) - len(lines[b].lstrip())
print("\n".join(l[ind:] for l in lines[b:e + 1]))
PY
}

repo() { # repo DIR FILE...: a base commit, then the "pull request" adding FILEs under kernels/softmax
	d=$1; shift
	mkdir -p "$d/kernels/softmax"
	git -C "$d" init -q
	git -C "$d" -c user.email=ci@example.org -c user.name=ci commit -q --allow-empty -m base
	for f in "$@"; do cp "$top/$f" "$d/kernels/softmax/"; done
	git -C "$d" add kernels
	git -C "$d" -c user.email=ci@example.org -c user.name=ci commit -q -m "pull request"
}

run_job() { # run_job EXAMPLE DIR: the example's commands in DIR, as the CI would; echoes the exit
	commands "$top/examples/ci/$1" >"$tmp/$1.sh"
	base=$(git -C "$2" rev-list --max-parents=0 HEAD)
	(cd "$2" && env PATH="$tmp/bin:$PATH" KGATE_HOME="$top" KGATE_POLICY="$top/policy/ci.yaml" \
		BASE_SHA="$base" CI_MERGE_REQUEST_DIFF_BASE_SHA="$base" sh "$tmp/$1.sh" >"$tmp/$1.out" 2>&1)
	echo $?
}

# the pipelines diff a pull request with git: where git is missing (scripts/deps.sh does not install
# it; a checkout from a tarball has none) those cases are skipped, naming it
if ! command -v git >/dev/null 2>&1; then
	echo "skip the pipeline cases: git is not installed (Debian: git)"
else
for ex in github-actions.yml gitlab-ci.yml; do
	ok "$ex: the commands are marked" sh -c 'echo "$1" | grep -q "kgate verify"' _ "$(commands "examples/ci/$ex")"
	d="$tmp/r-$ex"
	repo "$d" examples/softmax/online.c examples/hostile/constant.c
	rc=$(run_job $ex "$d")
	ok "$ex: a hostile kernel fails the job (exit $rc)" [ "$rc" = 1 ]
	[ "$rc" = 1 ] || tail -n 20 "$tmp/$ex.out" | sed 's/^/     | /'
	ok "$ex: reports for both kernels parse and say why" python3 - "$d" <<'PY'
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1] + "/kgate-reports"
h = json.load(open(d + "/kernels_softmax_constant.c.json"))
o = json.load(open(d + "/kernels_softmax_online.c.json"))
assert h["exit_code"] == 1 and "check.constant_output" in [r["code"] for r in h["reasons"]], h["reasons"]
assert o["exit_code"] == 0, o["reasons"]
for n in ("constant", "online"):
    ET.parse(f"{d}/kernels_softmax_{n}.c.xml")
    s = json.load(open(f"{d}/kernels_softmax_{n}.c.sarif"))
    for r in s["runs"][0]["results"]:
        assert r["locations"][0]["physicalLocation"]["artifactLocation"] == \
            {"uri": f"kernels/softmax/{n}.c", "uriBaseId": "SRCROOT"}, r["locations"]
PY
	d="$tmp/h-$ex"
	repo "$d" examples/softmax/online.c
	rc=$(run_job $ex "$d")
	ok "$ex: an honest kernel passes the job (exit $rc)" [ "$rc" = 0 ]
	[ "$rc" = 0 ] || tail -n 20 "$tmp/$ex.out" | sed 's/^/     | /'
done
ok "github: one merged SARIF run for code scanning" python3 - "$tmp/r-github-actions.yml/kgate.sarif" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["version"] == "2.1.0" and len(s["runs"]) == 1
run = s["runs"][0]
ids = {r["id"] for r in run["tool"]["driver"]["rules"]}
assert run["results"] and all(r["ruleId"] in ids for r in run["results"]), run["results"]
assert run["originalUriBaseIds"]["SRCROOT"]["uri"].startswith("file:///")
PY
fi

# the vendor-agent example with its default PREFIX finds kgate through kgate.pc
if command -v protoc-c >/dev/null && pkg-config --exists libprotobuf-c 2>/dev/null; then
	inst="$tmp/inst"
	make --no-print-directory -s install-pc PREFIX="$inst" DESTDIR= >/dev/null
	mkdir -p "$inst/include/kgate" "$inst/share/kgate/proto"
	cp include/kgate/*.h "$inst/include/kgate/" && cp proto/kgate.proto "$inst/share/kgate/proto/"
	cp -r examples/vendor-agent "$tmp/vendor"
	PKG_CONFIG_PATH="$inst/share/pkgconfig" make --no-print-directory -C "$tmp/vendor" >"$tmp/vendor.out" 2>&1
	ok "vendor-agent: make with the default PREFIX builds through kgate.pc" [ -f "$tmp/vendor/libacme-agent.so" ]
	[ -f "$tmp/vendor/libacme-agent.so" ] || tail -n 10 "$tmp/vendor.out" | sed 's/^/     | /'
fi
finish
