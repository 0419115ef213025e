#!/bin/sh
# Runs each AFL++ harness for a while and fails when any input crashed it (CI: `make fuzz-run`).
# Usage: tests/fuzz/run.sh FUZZ_BUILD SECONDS NAME...
set -u
build=$1 secs=$2
shift 2
out=$(mktemp -d "${TMPDIR:-/tmp}/kgate-fuzz-XXXXXX")
trap 'rm -rf "$out"' EXIT
export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 \
	KGATE_HOME="$(pwd)" TMPDIR="$out" # the harnesses' scratch directories go with $out
bad=0
for name in "$@"; do
	timeout $((secs + 60)) afl-fuzz -V "$secs" -i "tests/fuzz/corpus/$name" -o "$out/$name" \
		-- "$build/fuzz/$name" >"$out/$name.log" 2>&1
	rc=$?
	crashes=$(ls "$out/$name"/default/crashes/id:* 2>/dev/null | wc -l)
	execs=$(sed -n 's/^execs_done *: *//p' "$out/$name/default/fuzzer_stats" 2>/dev/null)
	if [ "$crashes" -gt 0 ]; then
		bad=1
		echo "FAIL  fuzz $name: $crashes crashing inputs, e.g.:"
		for f in $(ls "$out/$name"/default/crashes/id:* | head -3); do od -c "$f" | head -5 | sed 's/^/      /'; done
		mkdir -p fuzz-crashes && cp "$out/$name"/default/crashes/id:* fuzz-crashes/ 2>/dev/null
		echo "      (copied to fuzz-crashes/; replay: $build/fuzz/$name FILE or the plain fuzz-$name)"
	elif [ -z "$execs" ]; then
		bad=1
		echo "FAIL  fuzz $name: afl-fuzz did not run (exit $rc):"
		tail -n 15 "$out/$name.log" | sed 's/^/      /'
	else
		echo "PASS  fuzz $name: ${secs}s, $execs executions, no crash"
	fi
done
exit $bad
