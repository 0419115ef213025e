#!/bin/sh
# Integration: `kgate search` against a real HTTP server on 127.0.0.1 that speaks the OpenAI and
# Anthropic protocols, serves honest, broken and hostile candidates and injects faults (429 with
# Retry-After, 500, a response slower than the client timeout, malformed JSON). The search must
# retry through the faults, reject the broken and hostile candidates with their reasons, pick
# the honest one as the winner, feed the findings back, and never write the API key anywhere.
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh
need_verifier
KEY=sk-test-SECRET-0123456789
AGENT_OPTS="--agent-opt timeout_s=2 --agent-opt backoff_ms=100 --agent-opt max_retries=5"

for agent in openai anthropic; do
	start_server --faults 429,500,slow,malformed --slow-seconds 4 --key "$KEY"
	out="$tmp/$agent"
	# openai: key and model from the environment; anthropic: from an agent config file
	if [ $agent = openai ]; then
		env="OPENAI_API_KEY=$KEY"
		cfg="base_url=http://127.0.0.1:$port/v1"
		printf '{}\n' >"$tmp/$agent.yaml"
	else
		env="KGATE_UNUSED=1"
		cfg="base_url=http://127.0.0.1:$port"
		printf 'api_key: %s\nmodel: fake-model\n' "$KEY" >"$tmp/$agent.yaml"
	fi
	env "$env" KGATE_MODEL=fake-model "$KGATE" search softmax --agent $agent --agent-config "$tmp/$agent.yaml" \
		--agent-opt "$cfg" $AGENT_OPTS --rounds 2 --branch 2 --candidates 2 --out "$out" $P >"$tmp/$agent.out" 2>&1
	rc=$?
	ok "$agent: exit 0 (got $rc)" [ $rc -eq 0 ]
	[ $rc -eq 0 ] || tail -n 30 "$tmp/$agent.out" | sed 's/^/     | /'
	ok "$agent: the honest candidate is the winner" cmp -s "$out/winner.c" "$CANDS/honest.c"
	ok "$agent: winner.json names it accepted" is_true "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"] == "accepted")' "$out/winner.json")"
	ok "$agent: four distinct candidates verified once each" is_true "$(hist "$out" 'len(c) == 4 and len({e["id"] for e in c}) == 4')"
	ok "$agent: the broken one has compile.error" is_true "$(hist "$out" '"compile.error" in codes("broken")')"
	ok "$agent: the input-zeroing one is rejected with its reason" is_true "$(hist "$out" 'verdict("hostile_zero") == ["rejected"] and "sandbox.crash" in codes("hostile_zero")')"
	ok "$agent: the socket one is rejected" is_true "$(hist "$out" 'verdict("hostile_socket") == ["rejected"] and len(codes("hostile_socket")) > 0')"
	ok "$agent: both rounds recorded" is_true "$(hist "$out" 'sorted(e["round"] for e in ev if e["event"] == "round") == [1, 2]')"
	ok "$agent: each fault served once" is_true "$(stats "all(s['served'].get('$agent:' + f) == 1 for f in ('429', '500', 'slow', 'malformed'))")"
	ok "$agent: the faults were retried (ideas + 2 ideas, twice, + 4 faults)" is_true "$(stats "s['requests']['$agent'] == 10")"
	ok "$agent: requests were well-formed and authenticated" is_true "$(stats "not s['bad_requests'] and '$agent:401' not in s['served']")"
	ok "$agent: round 2 prompts carried the verifier's findings" is_true "$(stats "s['feedback_seen']")"
	ok "$agent: Retry-After was honoured" grep -q "(Retry-After)" "$tmp/$agent.out"
	ok "$agent: the agent's log (retries) is kept in the history" is_true "$(hist "$out" 'any("(Retry-After)" in e["agent_log"] for e in ev if e["event"] == "round")')"
	ok "$agent: the key is in no output file" sh -c "! grep -rq '$KEY' '$out'"
	ok "$agent: the key is not printed" sh -c "! grep -q '$KEY' '$tmp/$agent.out'"
	ok "$agent: the key is not sent in a body" is_true "$(stats "not s['key_in_body']")"
	stop_server
done
finish
