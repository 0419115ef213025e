# Shared helpers for the integration scripts: run the real kgate binary, assert the exit code and
# the reason codes in its JSON report. Sourced, not run.
B=${KGATE_BUILD:-build}
KGATE="$B/kgate"
failures=0
checked=0
tmp=$(mktemp -d /tmp/kgate-it-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# each script gets its own compile cache (warm within the script, cold at its start): the tests
# neither fill the user's ~/.cache nor depend on what an earlier run left there
export KGATE_CACHE_DIR="${KGATE_CACHE_DIR:-$tmp/cache}"

# kgate ARGS...: the real kgate, each run bounded by KGATE_STEP_S seconds where that is set (a GPU
# run's budget is short: a run past it is exit 124, its output printed as any failure's)
kgate() {
	if [ -n "${KGATE_STEP_S:-}" ]; then
		timeout -k 10 "$KGATE_STEP_S" "$KGATE" "$@"
	else
		"$KGATE" "$@"
	fi
}

# expect EXIT REASON TASK CANDIDATE [kgate args...]
# REASON is a reason code that must appear in the report, or "-" for none (accepted runs must
# have no reasons at all).
expect() {
	want_exit=$1 want_code=$2 task=$3 cand=$4
	shift 4
	checked=$((checked + 1))
	json="$tmp/report-$checked.json"
	kgate verify "$task" "$cand" --quiet --report "json:$json" "$@" >"$tmp/out" 2>&1
	rc=$?
	codes=$(python3 -c 'import json,sys; print(" ".join(r["code"] for r in json.load(open(sys.argv[1]))["reasons"]))' "$json" 2>/dev/null)
	ok=1
	[ "$rc" = "$want_exit" ] || ok=0
	if [ "$want_code" = "-" ]; then
		[ -z "$codes" ] || ok=0
	else
		case " $codes " in *" $want_code "*) ;; *) ok=0 ;; esac
	fi
	if [ $ok = 1 ]; then
		# where the time went, and the timing when there is one
		took=$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); u=d["durations"]; t=d.get("timing")
s="%.1fs: compile %.1f, start %.1f, checks %.1f, timing %.1f" % (u["total_s"], u["compile_s"], u["sandbox_start_s"], u["checks_s"], u["timing_s"])
if t: s += "; cand %.4f ms (spread %.1f%%), ref %.4f ms, %.2fx" % (t["candidate"]["median_ms"], 100*t["candidate"]["spread"], t["reference"]["median_ms"], t["speedup"])
san = [c for c in d.get("checks", []) if c["name"] in ("memcheck", "racecheck", "synccheck", "initcheck")]
if san: s += "; " + ", ".join("%s %s %.1fs" % (c["name"], c["status"], c.get("seconds", 0)) for c in san)
print(s)' "$json" 2>/dev/null)
		echo "ok   $task $(basename "$cand"): exit $rc ${codes:-(no reasons)}${took:+ [$took]}"
		# the wanted reason's words, for the reader of the log
		[ "$want_code" = "-" ] || python3 -c 'import json,sys
r=[r for r in json.load(open(sys.argv[1]))["reasons"] if r["code"]==sys.argv[2]]
r and print("     >", r[0]["message"][:300])' "$json" "$want_code" 2>/dev/null
	else
		failures=$((failures + 1))
		echo "FAIL $task $(basename "$cand"): want exit $want_exit with $want_code, got exit $rc with '${codes}'"
		sed 's/^/     | /' "$tmp/out" | tail -n 30
		[ -f "$json" ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [print("     |", r["code"], r["message"]) for r in d["reasons"]]; print("     | error:", d.get("error",""))' "$json"
	fi
}

# need_torch: the script is skipped (exit 77) where kgate finds no Python with torch, and the
# KernelBench test modules and candidates (D, C) and their small dims (SM, CV) are set
need_torch() {
	if ! "$KGATE" doctor 2>/dev/null | grep -q "python    torch: /"; then
		echo "no Python with torch (scripts/deps.sh installs python3-torch)"
		exit 77
	fi
	D=tests/data/kernelbench
	C=$D/cand
	SM="--dims batch_size=4,features=64"
	CV="--dims batch_size=2,in_channels=3,out_channels=4,height=10,width=10"
}

# load_inline_ready: true where a ModelNew's load_inline extensions can be built here (kgate doctor's
# load_inline line: the C++ compiler, torch's, pybind11's and Python's headers, torch's libraries);
# otherwise the cases are skipped, the missing pieces named (scripts/deps.sh installs them)
load_inline_ready() {
	li=$("$KGATE" doctor 2>/dev/null | grep "load_inline")
	case "$li" in
	*"load_inline torch: ok") return 0 ;;
	esac
	echo "skip load_inline cases: ${li:-kgate doctor names no load_inline toolchain}"
	return 1
}

ok() { # ok DESCRIPTION COMMAND...: one assertion that is not a verification
	what=$1; shift
	checked=$((checked + 1))
	if "$@"; then
		echo "ok   $what"
	else
		failures=$((failures + 1))
		echo "FAIL $what"
	fi
}

finish() {
	echo "$checked checked, $failures failed"
	[ $failures -eq 0 ]
}
