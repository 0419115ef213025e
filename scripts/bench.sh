#!/bin/sh
# Runs every benchmark program of a build; each prints its own side-by-side table.
set -u
build=${1:-build}
export KGATE_BUILD="$build" KGATE_HOME="$(pwd)"
rc=0
for b in "$build"/bench/bin/*; do
	[ -x "$b" ] || continue
	echo "== $(basename "$b")"
	"$b" || { st=$?; [ $st -eq 77 ] && echo "(skipped)" || rc=1; }
done
exit $rc
