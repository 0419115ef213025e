#!/bin/sh
# Integration: signals leave nothing. A running `kgate verify` (SIGINT, SIGTERM, SIGHUP), a
# running `kgate search` (SIGTERM, SIGINT) and a running `kgate task import` of a PyTorch module
# (SIGTERM, SIGINT; of a directory of them, SIGINT) are interrupted while their sandboxes run:
# kgate says "interrupted", exits 128+signal (130, 143, 129), and afterwards no process of its tree
# is alive and its TMPDIR holds no kgate-* directory (kgate 0.1 left kgate-run spinning and /tmp/kgate-*
# behind, and a search ended on SIGINT without a word; kgate 0.2 left the import's sandboxed torch
# process running, and its /tmp/kgate-derive-*). A `kgate task import` or `kgate verify` killed
# outright (SIGKILL: nothing of kgate can act) leaves no process either: each sandbox dies with its
# spawner (kgate 0.2 run as root: the torch process lived on).
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

def stat_of(pid):
    """(state, start time) of a live pid, None when there is none"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return None
    rest = st[st.rindex(")") + 2:].split()
    return rest[0], rest[19]

def snapshot(pids):
    """each pid with its start time: a recycled pid is not the process we saw"""
    out = {}
    for x in pids:
        s = stat_of(x)
        if s:
            out[x] = s[1]
    return out

def alive(snap):
    left = []
    for x, start in snap.items():
        s = stat_of(x)
        if s and s[1] == start and s[0] != "Z":
            left.append(x)
    return left

def wait_gone(snap, secs):
    """bounded: the processes we saw, still alive after secs (a kill is asynchronous)"""
    deadline = time.time() + secs
    left = alive(snap)
    while left and time.time() < deadline:
        time.sleep(0.05)
        left = alive(snap)
    return left

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

def case(name, args, sig, marker="kgate-run", supervised=True):
    work = os.path.join(tmp, name)
    os.makedirs(work)
    env = dict(os.environ, TMPDIR=work)
    p = subprocess.Popen([kgate] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=default_signals)
    seen, deadline = {}, time.time() + 120
    while time.time() < deadline and p.poll() is None:
        pids = tree(p.pid)
        if any(marker in cmdline(x) for x in pids):
            if marker == "kgate-run":
                time.sleep(0.3)
            seen = snapshot(x for x in tree(p.pid) if x != p.pid)
            break
        time.sleep(0.05)
    check(f"{name}: a sandboxed {marker} was running when the signal came", bool(seen))
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(f"{name}: ended within 60 s", False)
    want = 128 + sig if supervised else -sig
    check(f"{name}: exit {want} (got {p.returncode})", p.returncode == want, err.decode()[-500:])
    if supervised:
        check(f"{name}: says interrupted", b"interrupted" in err, err.decode()[-300:])
    # a supervised kgate reaped its tree before it exited; a killed one cannot, and its sandboxes
    # die when the kernel tells them their spawner is gone: bounded, not a fixed pause
    left = wait_gone(seen, 0.5 if supervised else 20)
    check(f"{name}: none of its {len(seen)} processes is left", not left,
          " ".join(f"{x}:{cmdline(x)}" for x in left))
    for x in left:  # ours: started by this test, checked against their start times
        try:
            os.kill(x, signal.SIGKILL)
        except OSError:
            pass
    if supervised:
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
# a module whose import takes a minute: the derivation's torch process is running when the signal
# comes (its top level sleeps)
slow = os.path.join(tmp, "slow_softmax.py")
with open(slow, "w") as f, open("tests/data/kernelbench/softmax.py") as src:
    f.write("import time\ntime.sleep(60)\n" + src.read())
case("import-term", ["task", "import", slow, "--out", os.path.join(tmp, "i1")], signal.SIGTERM, "torch_runner.py")
case("import-int", ["task", "import", slow, "--out", os.path.join(tmp, "i2")], signal.SIGINT, "torch_runner.py")
case("import-kill", ["task", "import", slow, "--out", os.path.join(tmp, "i3")], signal.SIGKILL, "torch_runner.py",
     supervised=False)
# a directory: its derivations run in processes of their own, started from threads
slowdir = os.path.join(tmp, "slowdir")
os.makedirs(slowdir)
for i in range(3):
    with open(os.path.join(slowdir, "s%d.py" % i), "w") as f, open(slow) as src:
        f.write(src.read())
case("import-dir-int", ["task", "import", "--kernelbench", slowdir, "--out", os.path.join(tmp, "i4")], signal.SIGINT,
     "--derive-serve")
case("verify-kill", V, signal.SIGKILL, supervised=False)
sys.exit(1 if fails else 0)
PY
checked=$((checked + 1))
finish
