# Helpers for the search integration scripts (tests/integration/search_*.sh): the fake LLM
# server and queries over a search's history. Sourced after
# tests/integration/lib.sh, which provides $KGATE, $tmp, ok and finish.
P="--policy policy/ci.yaml --iterations 5"
CANDS=tests/agents/candidates
server_pid=""
trap 'stop_server; rm -rf "$tmp"' EXIT

# Skips the whole script (exit 77) when this machine cannot verify the honest candidate at all
# (no sandbox support, say): the search would only record infrastructure errors.
need_verifier() {
	for _ in 1 2 3; do # a loaded machine can make one verification flaky; three never pass only then
		"$KGATE" verify softmax "$CANDS/honest.c" $P --quiet >"$tmp/precheck" 2>&1
		rc=$?
		[ $rc -eq 0 ] && break
	done
	if [ $rc -ne 0 ]; then
		tail -n 3 "$tmp/precheck"
		echo "kgate verify cannot accept the honest candidate here (exit $rc); skipped"
		exit 77
	fi
}

start_server() { # start_server [fake_llm.py args...]; sets $port
	rm -f "$tmp/port"
	python3 tests/agents/fake_llm.py --port-file "$tmp/port" --candidates "$CANDS" "$@" 2>"$tmp/server.log" &
	server_pid=$!
	for _ in $(seq 100); do
		[ -s "$tmp/port" ] && break
		sleep 0.1
	done
	port=$(cat "$tmp/port" 2>/dev/null)
	[ -n "$port" ] || { echo "fake LLM server did not start"; cat "$tmp/server.log"; exit 1; }
}

stop_server() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	server_pid=""
}

stats() { # stats PYTHON-EXPRESSION over s (the server's /stats)
	python3 - "$1" "http://127.0.0.1:$port/stats" <<'PY'
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[2]))
print(eval(sys.argv[1]))
PY
}

hist() { # hist OUTDIR PYTHON-EXPRESSION over c (candidate lines), ev (all lines)
	python3 - "$1" "$2" <<'PY'
import json, sys
ev = []
for line in open(sys.argv[1] + "/history.jsonl"):
    try:
        ev.append(json.loads(line))
    except ValueError:
        pass
c = [e for e in ev if e.get("event") == "candidate"]
def codes(name):
    """reason codes of the candidate whose source is tests/agents/candidates/NAME.c"""
    import hashlib
    h = hashlib.sha256(open("tests/agents/candidates/%s.c" % name, "rb").read()).hexdigest()
    return [r["code"] for e in c if e["id"] == h for r in e["reasons"]]
def verdict(name):
    import hashlib
    h = hashlib.sha256(open("tests/agents/candidates/%s.c" % name, "rb").read()).hexdigest()
    return [e["verdict"] for e in c if e["id"] == h]
print(eval(sys.argv[2]))
PY
}

is_true() { [ "$1" = "True" ]; }
