#!/bin/sh
# Integration: the compile cache (verifier/compile/cache.c) through the real kgate binary. A second
# verification of the same candidate skips the compiler and says so in its report, with the same
# compile log; a changed source misses; a tampered entry is detected, removed and rebuilt;
# --no-cache neither reads nor writes; a failed compile is never cached; a cache directory that
# others can write is not used (and kgate says why) while the verification goes on.
set -u
. tests/integration/lib.sh

export KGATE_CACHE_DIR="$tmp/cache" # its own, whatever the caller set
P="--policy policy/ci.yaml --iterations 5"
store="$KGATE_CACHE_DIR/compile"

# field REPORT: durations.compile_cached, the compile check's detail and the log, one per line
cached() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["durations"]["compile_cached"])' "$1"; }
detail() { python3 -c 'import json,sys; print([c["detail"] for c in json.load(open(sys.argv[1]))["checks"] if c["name"]=="compile"][0])' "$1"; }
clog() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("compile_log",""))' "$1"; }
entries() { ls "$store" 2>/dev/null | grep -c '\.kgc$'; }
last() { echo "$tmp/report-$checked.json"; }

# a candidate whose compile warns, so that the cached log has something to show
cp examples/softmax/online.c "$tmp/warn.c"
printf '\nstatic int kg_unused_helper(void) { int unused_var; return 0; }\n' >>"$tmp/warn.c"

expect 0 - softmax "$tmp/warn.c" $P
first=$(last)
ok "first run compiles (compile_cached false)" test "$(cached "$first")" = False
ok "the reference and the candidate are stored (2 entries)" test "$(entries)" = 2
ok "the store is private (0700)" test "$(stat -c %a "$KGATE_CACHE_DIR")" = 700

expect 0 - softmax "$tmp/warn.c" $P
second=$(last)
ok "second run skips the compiler (compile_cached true)" test "$(cached "$second")" = True
ok "its compile check says cached" sh -c "case '$(detail "$second")' in cached:*) exit 0;; esac; exit 1"
ok "the cached compile log is the compiler's, warnings and all" \
	sh -c "[ -n \"\$1\" ] && [ \"\$1\" = \"\$2\" ] && case \"\$1\" in *unused*) exit 0;; esac; exit 1" _ \
	"$(clog "$first")" "$(clog "$second")"

# a one-byte change of the source misses (and the reference, unchanged, still hits)
cp "$tmp/warn.c" "$tmp/changed.c"
printf '/* changed */\n' >>"$tmp/changed.c"
expect 0 - softmax "$tmp/changed.c" $P
ok "a modified source misses" test "$(cached "$(last)")" = False
ok "and is stored as its own entry" test "$(entries)" = 3

# tamper with every entry (one byte near the end: the .so): each is detected, removed, rebuilt
for f in "$store"/*.kgc; do
	python3 - "$f" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-40] ^= 0xff
open(p, "wb").write(b)
EOF
done
expect 0 - softmax "$tmp/warn.c" $P
ok "a tampered entry is a miss: the candidate is compiled again" test "$(cached "$(last)")" = False
ok "the damaged entries were rebuilt (3: the changed source's is still the damaged one)" test "$(entries)" = 3
expect 0 - softmax "$tmp/warn.c" $P
ok "the rebuilt entry serves the next run" test "$(cached "$(last)")" = True

# --no-cache: compiles, and neither reads nor writes the cache
cp "$tmp/warn.c" "$tmp/nocache.c"
printf '/* no cache */\n' >>"$tmp/nocache.c"
before=$(ls -l --time-style=+%s.%N "$store")
expect 0 - softmax "$tmp/warn.c" $P --no-cache
ok "--no-cache compiles a cached candidate" test "$(cached "$(last)")" = False
expect 0 - softmax "$tmp/nocache.c" $P --no-cache
ok "--no-cache neither stores nor touches an entry" test "$(ls -l --time-style=+%s.%N "$store")" = "$before"

# a failed compile is not cached: the same verdict each time, from the compiler each time
expect 1 compile.error softmax examples/broken/syntax_error.c $P
expect 1 compile.error softmax examples/broken/syntax_error.c $P
ok "a failed compile is compiled again, not cached" test "$(cached "$(last)")" = False
ok "and leaves no entry (the reference's is already there)" test "$(entries)" = 3

# a cache others can write is not trusted: kgate says so and compiles
chmod 0770 "$KGATE_CACHE_DIR"
"$KGATE" verify softmax "$tmp/warn.c" $P --quiet --report json:"$tmp/gw.json" >"$tmp/gw.out" 2>&1
ok "a group-writable cache: verified all the same (exit 0)" test $? = 0
ok "... without the cache" test "$(cached "$tmp/gw.json")" = False
ok "... and kgate says why" grep -q "compile cache not used: .*group-writable" "$tmp/gw.out"
chmod 0700 "$KGATE_CACHE_DIR"

# a symbolic link as the cache directory is not followed
ln -s "$KGATE_CACHE_DIR" "$tmp/cache-link"
KGATE_CACHE_DIR="$tmp/cache-link" "$KGATE" verify softmax "$tmp/warn.c" $P --quiet --report json:"$tmp/ln.json" \
	>"$tmp/ln.out" 2>&1
ok "a symlinked cache directory is refused, the verification goes on" \
	sh -c "grep -q 'compile cache not used: .*symbolic link' '$tmp/ln.out' && [ \"\$(python3 -c 'import json; print(json.load(open(\"$tmp/ln.json\"))[\"durations\"][\"compile_cached\"])')\" = False ]"

# the upkeep command
ok "kgate cache stats counts the entries" sh -c "'$KGATE' cache stats | grep -q ': 3 entries'"
ok "kgate cache clear empties it" sh -c "'$KGATE' cache clear | grep -q 'removed 3 entries' && [ \$(ls '$store' | wc -l) = 0 ]"
KGATE_CACHE_MAX_MB=0 "$KGATE" verify softmax "$tmp/warn.c" $P --quiet >"$tmp/off.out" 2>&1
ok "KGATE_CACHE_MAX_MB=0 turns the cache off, silently" sh -c "[ \$(ls '$store' | wc -l) = 0 ] && ! grep -q cache '$tmp/off.out'"
finish
