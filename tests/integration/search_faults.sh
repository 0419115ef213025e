#!/bin/sh
# Integration: agents that misbehave must not take kgate down. Under process isolation a plugin
# that segfaults or hangs costs its round (reported, recorded) and the search goes on; plugins
# with a wrong ABI or missing symbol, unknown agents, bad settings, a missing API key and an
# unreachable endpoint give clear errors and the documented exit codes.
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
FAULTY="$B/tests/plugins/faulty.so"

out="$tmp/faulty"
"$KGATE" search softmax --agent "$FAULTY" --agent-opt "candidate=$CANDS/honest.c" --agent-opt crash_rounds=1 \
	--agent-opt hang_rounds=2 --agent-opt stdout_noise=1 --agent-timeout 2 --rounds 3 --branch 1 --candidates 1 \
	--out "$out" $P >"$tmp/f.out" 2>"$tmp/f.err"
rc=$?
# The exit code follows the one verdict (round 3's): 0 accepted, 1 rejected, 3 not verifiable here.
want=$(hist "$out" '{"accepted": 0, "rejected": 1}.get(c[0]["verdict"], 3) if len(c) == 1 else "none"')
ok "crash+hang: exit $want, as round 3's verdict says (got $rc)" [ "$rc" = "$want" ]
ok "crash+hang: the segfault is reported" grep -q "round 1: agent 'faulty': its helper process killed by SIGSEGV" "$tmp/f.err"
ok "crash+hang: the hang is reported" grep -q "round 2: agent 'faulty' did not answer within 2 s" "$tmp/f.err"
ok "crash+hang: both recorded in the history" is_true "$(hist "$out" '[e["round"] for e in ev if e["event"] == "agent_error"] == [1, 2]')"
ok "crash+hang: round 3 went on and verified" is_true "$(hist "$out" '[e["round"] for e in c] == [3]')"
ok "crash+hang: plugin chatter on stdout did not break the protocol" grep -q "noise" "$tmp/f.err"
[ $want -eq 0 ] && ok "crash+hang: winner from round 3" cmp -s "$out/winner.c" "$CANDS/honest.c"

# refused plugins and configuration errors: exit 2, with the reason
expect_search() { # expect_search EXIT PATTERN kgate-search-args...
	want_rc=$1 pattern=$2
	shift 2
	"$KGATE" search softmax --rounds 1 --out "$tmp/cfg-$checked" $P "$@" >"$tmp/c.out" 2>&1
	rc=$?
	ok "exit $want_rc and '$pattern' for: $*" sh -c "[ $rc -eq $want_rc ] && grep -q -e \"$pattern\" '$tmp/c.out'"
	[ $rc -eq $want_rc ] && grep -q -e "$pattern" "$tmp/c.out" || sed 's/^/     | /' "$tmp/c.out" | tail -n 5
}
expect_search 2 "agent ABI 2.0, this kgate speaks 1.x" --agent "$B/tests/plugins/badmajor.so"
expect_search 2 "does not export kg_agent_plugin_v1" --agent "$B/tests/plugins/nosymbol.so"
expect_search 2 "plugin table has no propose" --agent "$B/tests/plugins/nopropose.so"
expect_search 2 "no such-agent.so in" --agent such-agent
expect_search 2 "told to fail in create" --agent "$FAULTY" --agent-opt fail_create=1
expect_search 2 "unknown setting 'modle'" --agent openai --agent-opt modle=x
expect_search 2 "no API key for https://api.openai.com/v1: set OPENAI_API_KEY" --agent openai --agent-opt model=m
expect_search 2 "no model: set KGATE_MODEL" --agent anthropic --agent-opt api_key=k
expect_search 2 "no directory" --agent replay
expect_search 2 "--agent is required"
expect_search 2 "expected a number" --agent replay --rounds 0
expect_search 2 "expected process or inproc" --agent replay --agent-isolation thread
expect_search 2 "holds a search for task" --agent replay --agent-opt "dir=$CANDS" --out "$tmp/faulty" --backend cuda
expect_search 3 "cannot reach http://127.0.0.1:1/v1/chat/completions" --agent openai --agent-opt model=m \
	--agent-opt base_url=http://127.0.0.1:1/v1 --agent-opt max_retries=1 --agent-opt backoff_ms=10
finish
