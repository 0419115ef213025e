#!/usr/bin/env python3
"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions and Anthropic Messages
protocols, for the search integration tests. It answers idea prompts with two ideas and candidate
prompts with canned sources (honest, broken, hostile) in varied fence styles (with --modules, a
prompt that asks for a KernelBench ModelNew gets the directory's softmax_modelnew.py and
softmax_empty.py in Python fences), injects faults on
the first requests of each protocol (429 with Retry-After, 500, a response slower than the
client's timeout, malformed JSON), checks the requests' shape and credentials, and counts
everything at GET /stats.

usage: fake_llm.py --port-file FILE --candidates DIR [--faults 429,500,slow,malformed]
                   [--slow-seconds S] [--key KEY] [--dump-prompts DIR] [--modules DIR]
"""
import argparse
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IDEAS = ["online softmax: max and sum in one pass", "shortcut: skip the work"]


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.faults = [f for f in args.faults.split(",") if f] if args.faults else []
        self.requests = {"openai": 0, "anthropic": 0}
        self.served = {}  # "openai:429" -> count
        self.bad_requests = []
        self.feedback_seen = False  # a later round's prompt carried the verifier's findings
        self.key_in_body = False
        self.modelnew_prompts = 0  # prompts that asked for a KernelBench ModelNew module
        src = args.candidates
        self.sources = {n: open(os.path.join(src, n + ".c")).read()
                        for n in ("honest", "broken", "hostile_zero", "hostile_socket")}
        if args.modules:
            for n in ("softmax_modelnew", "softmax_empty"):
                self.sources[n] = open(os.path.join(args.modules, n + ".py")).read()

    def count(self, what):
        self.served[what] = self.served.get(what, 0) + 1


def fence(label, code, crlf=False):
    text = "```%s\n%s```\n" % (label, code)
    return text.replace("\n", "\r\n") if crlf else text


def answer_for(state, prompt):
    """The model's text for a prompt: ideas as JSON, or candidates for one idea."""
    m = re.search(r"# Round (\d+)", prompt)
    rnd = int(m.group(1)) if m else 0
    if rnd >= 2 and "compile.error" in prompt and "Compiler output" in prompt:
        state.feedback_seen = True
    s = state.sources
    if state.args.modules and "`class ModelNew(nn.Module)` with the same constructor arguments" in prompt:
        state.modelnew_prompts += 1
        if "distinct ideas" in prompt:
            return "Two ideas:\n```json\n%s\n```\n" % json.dumps(IDEAS)
        m = re.search(r"implement this idea\n(.*)\n", prompt)
        idea = m.group(1) if m else ""
        if idea == IDEAS[0]:
            return "The module:\n" + fence("python", s["softmax_modelnew"])
        return "Skipping work:\n~~~py\n" + s["softmax_empty"] + "~~~\n"
    if "distinct ideas" in prompt:
        return "Two ideas:\n```json\n%s\n```\n" % json.dumps(IDEAS)
    m = re.search(r"implement this idea\n(.*)\n", prompt)
    idea = m.group(1) if m else ""
    if idea == IDEAS[0]:
        # honest in a ```c block, broken in an unlabeled one with CRLF line ends
        return ("Here is the fast version:\n" + fence("c", s["honest"]) +
                "And a variant:\n" + fence("", s["broken"], crlf=True))
    if idea == IDEAS[1]:
        return ("Skipping work:\n" + fence("cpp", s["hostile_zero"]) +
                "Or fetch the answer:\n~~~C\n" + s["hostile_socket"] + "~~~\n")
    return "I have no idea."


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-llm/1"

    def log_message(self, fmt, *a):  # quiet
        pass

    def reply(self, code, body, headers=None):
        data = body.encode() if isinstance(body, str) else body
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the slow fault): expected

    def do_GET(self):
        st = self.server.state
        if self.path != "/stats":
            return self.reply(404, '{"error": "not found"}')
        with st.lock:
            body = json.dumps({"requests": st.requests, "served": st.served, "bad_requests": st.bad_requests,
                               "feedback_seen": st.feedback_seen, "key_in_body": st.key_in_body,
                               "modelnew_prompts": st.modelnew_prompts})
        self.reply(200, body)

    def do_POST(self):
        st = self.server.state
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        proto = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}.get(self.path)
        if not proto:
            return self.reply(404, '{"error": {"message": "no such endpoint"}}')
        key = st.args.key
        with st.lock:
            st.requests[proto] += 1
            i = st.requests[proto]
            if key and key.encode() in raw:
                st.key_in_body = True
        # credentials first, as a real server does
        if key:
            got = (self.headers.get("Authorization") if proto == "openai" else self.headers.get("x-api-key"))
            want = "Bearer " + key if proto == "openai" else key
            if got != want:
                with st.lock:
                    st.count(proto + ":401")
                return self.reply(401, '{"error": {"message": "bad key"}}')
        fault = st.faults[i - 1] if i <= len(st.faults) else None
        if fault:
            with st.lock:
                st.count("%s:%s" % (proto, fault))
            if fault == "429":
                return self.reply(429, '{"error": {"message": "rate limited"}}', {"Retry-After": "1"})
            if fault == "500":
                return self.reply(500, '{"error": {"message": "internal"}}')
            if fault == "malformed":
                return self.reply(200, '{"choices": [{"message": {"content": "trunc')
            if fault == "slow":
                time.sleep(st.args.slow_seconds)  # the client has given up by now
        try:
            req = json.loads(raw)
            if proto == "openai":
                msgs = req["messages"]
                assert req["model"] and msgs[0]["role"] == "system" and msgs[-1]["role"] == "user"
                prompt = msgs[-1]["content"]
            else:
                assert self.headers.get("anthropic-version")
                assert req["model"] and req["max_tokens"] > 0 and isinstance(req["system"], str)
                assert req["messages"][-1]["role"] == "user"
                prompt = req["messages"][-1]["content"]
        except Exception as ex:  # noqa: BLE001 - any malformed request is a test failure
            with st.lock:
                st.bad_requests.append("%s: %r" % (proto, ex))
            return self.reply(400, '{"error": {"message": "bad request"}}')
        with st.lock:
            text = answer_for(st, prompt)
            st.count(proto + ":ok")
            if st.args.dump_prompts:
                with open(os.path.join(st.args.dump_prompts, "%s-%03d.txt" % (proto, i)), "w") as f:
                    f.write(prompt)
        if proto == "openai":
            body = {"id": "x", "object": "chat.completion", "model": req["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}]}
        else:
            body = {"id": "x", "type": "message", "role": "assistant", "model": req["model"],
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
        self.reply(200, json.dumps(body))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--faults", default="")
    ap.add_argument("--slow-seconds", type=float, default=4.0)
    ap.add_argument("--key", default="")
    ap.add_argument("--dump-prompts", default="", help="write each answered prompt into this directory")
    ap.add_argument("--modules", default="", help="ModelNew modules to answer ModelNew prompts with")
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.state = State(args)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
