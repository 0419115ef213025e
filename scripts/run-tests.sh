#!/bin/sh
# Runs every test program of a build, one process per program (libuv style), then the integration
# scripts. Exit status 77 from a program means "skipped" (no GPU, a kernel feature missing).
# Usage: scripts/run-tests.sh BUILD_DIR [PATTERN]
set -u
build=${1:-build}
pattern=${2:-}
export KGATE_BUILD="$build"
export KGATE_HOME="$(pwd)"
pass=0 fail=0 skip=0 failed=""

run_one() {
	name=$1; shift
	case "$name" in *"$pattern"*) ;; *) return ;; esac
	start=$(date +%s)
	"$@" >"$build/tests/log/$name.log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); echo "PASS  $name (${secs}s)"
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1)); echo "SKIP  $name: $(tail -n 1 "$build/tests/log/$name.log")"
	else
		fail=$((fail + 1)); failed="$failed $name"
		echo "FAIL  $name (exit $rc, ${secs}s); last lines of $build/tests/log/$name.log:"
		tail -n 40 "$build/tests/log/$name.log" | sed 's/^/      /'
	fi
}

mkdir -p "$build/tests/log"
for t in "$build"/tests/bin/*; do
	[ -x "$t" ] || continue
	run_one "$(basename "$t")" "$t"
done
for t in tests/integration/*.sh; do
	case "$t" in */lib.sh) continue ;; esac
	[ -f "$t" ] || continue
	run_one "$(basename "$t" .sh)" sh "$t"
done

echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
