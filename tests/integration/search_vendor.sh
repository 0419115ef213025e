#!/bin/sh
# Integration: a vendor builds the sample agent in examples/vendor-agent against a staged
# `make install` (the installed <kgate/agent.h> and share/kgate/proto/kgate.proto only), and
# kgate search runs it from its path.
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
stage="$tmp/stage"
# -o all: install what this build already made; never rebuild it with other flags.
make --no-print-directory -s -o all install DESTDIR="$stage" BUILD="$B" >"$tmp/install.out" 2>&1
rc=$?
ok "make install into a staging tree (exit $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || { tail -n 20 "$tmp/install.out"; finish; exit 1; }
prefix=$(find "$stage" -path '*/include/kgate/agent.h' | sed 's|/include/kgate/agent.h$||')
ok "agent.h, kgate.proto and the built-in plugins are installed" \
	sh -c "[ -f '$prefix/share/kgate/proto/kgate.proto' ] && ls '$prefix'/lib/kgate/plugins/openai.so >/dev/null"

# the public header stands alone, in C99 and C++
printf '#include <kgate/agent.h>\nint main(void) { return KG_AGENT_ABI_MAJOR != 1; }\n' >"$tmp/h.c"
ok "agent.h compiles alone (C99, -pedantic)" cc -std=c99 -pedantic -Wall -Werror -I"$prefix/include" -o "$tmp/h" "$tmp/h.c"
if command -v c++ >/dev/null 2>&1; then
	ok "agent.h compiles alone (C++)" c++ -x c++ -Wall -Werror -I"$prefix/include" -c -o "$tmp/h.o" "$tmp/h.c"
fi

cp -r examples/vendor-agent "$tmp/vendor"
make --no-print-directory -C "$tmp/vendor" PREFIX="$prefix" >"$tmp/vendor.out" 2>&1
rc=$?
ok "the vendor agent builds against the installed files (exit $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 20 "$tmp/vendor.out"
so="$tmp/vendor/libacme-agent.so"
ok "it exports exactly kg_agent_plugin_v1" is_true "$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | python3 -c 'import sys; print(sys.stdin.read().split() == ["kg_agent_plugin_v1"])')"

"$KGATE" search softmax --agent "$so" --rounds 2 --branch 1 --candidates 1 --out "$tmp/out" $P >"$tmp/s.out" 2>&1
rc=$?
ok "kgate search runs the vendor agent (exit $rc)" grep -q "agent: acme (isolated in a helper process)" "$tmp/s.out"
ok "its round-1 baseline was verified" is_true "$(hist "$tmp/out" '[e["round"] for e in c][:1] == [1]')"
# 0 when anything was accepted, 1 when all were rejected, 3 when nothing could be verified here
want=$(hist "$tmp/out" '0 if any(e["verdict"] == "accepted" for e in c) else 1 if any(e["verdict"] == "rejected" for e in c) else 3')
ok "exit $want, as the verdicts say (got $rc)" [ "$rc" = "$want" ]
[ -f "$tmp/out/history.jsonl" ] || tail -n 20 "$tmp/s.out"
finish
