#!/bin/sh
# Integration: signals leave nothing. A running `kgate verify` (SIGINT, SIGTERM, SIGHUP) and a
# running `kgate search` (SIGTERM, SIGINT) are interrupted while their sandboxes run: kgate says
# "interrupted", exits 128+signal (130, 143, 129), and afterwards no process of its tree is alive
# and its TMPDIR holds no kgate-* directory (kgate 0.1 left kgate-run spinning and /tmp/kgate-*
# behind, and a search ended on SIGINT without a word).
set -u
. tests/integration/lib.sh
python3 - "$KGATE" "$tmp" <<'PY' || failures=$((failures + 1))
import os, signal, subprocess, sys, time

kgate, tmp = sys.argv[1], sys.argv[2]

def children():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids

def tree(pid):
    kids, out, todo = children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out

def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""

def default_signals():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)

fails = 0
def check(what, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else " " + detail))
    fails += not cond

def case(name, args, sig):
    work = os.path.join(tmp, name)
    os.makedirs(work)
    env = dict(os.environ, TMPDIR=work)
    p = subprocess.Popen([kgate] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=default_signals)
    seen, deadline = [], time.time() + 120
    while time.time() < deadline and p.poll() is None:
        pids = tree(p.pid)
        if any("kgate-run" in cmdline(x) for x in pids):
            time.sleep(0.3)
            seen = [x for x in tree(p.pid) if x != p.pid]
            break
        time.sleep(0.05)
    check(f"{name}: a sandboxed runner was running when the signal came", bool(seen))
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(f"{name}: ended within 60 s", False)
        return
    check(f"{name}: exit {128 + sig} (got {p.returncode})", p.returncode == 128 + sig, err.decode()[-500:])
    check(f"{name}: says interrupted", b"interrupted" in err, err.decode()[-300:])
    time.sleep(0.5)
    alive = [x for x in seen if "kgate" in cmdline(x)]
    check(f"{name}: none of its {len(seen)} processes is left", not alive,
          " ".join(f"{x}:{cmdline(x)}" for x in alive))
    left = [d for d in os.listdir(work) if d.startswith("kgate-")]
    check(f"{name}: no kgate-* directory is left in TMPDIR", not left, str(left))

V = ["verify", "softmax", "examples/softmax/online.c", "--policy", "policy/ci.yaml", "--shape-set", "nominal", "-q"]
case("verify-int", V, signal.SIGINT)
case("verify-term", V, signal.SIGTERM)
case("verify-hup", V, signal.SIGHUP)
S = ["search", "softmax", "--agent", "replay", "--agent-opt", "dir=tests/agents/candidates", "--rounds", "3",
     "--branch", "2", "--candidates", "2", "--policy", "policy/ci.yaml", "--iterations", "5"]
case("search-term", S + ["--out", os.path.join(tmp, "s1")], signal.SIGTERM)
case("search-int", S + ["--out", os.path.join(tmp, "s2")], signal.SIGINT)
sys.exit(1 if fails else 0)
PY
checked=$((checked + 1))
finish
