#!/bin/sh
# Integration: the slurm executor against a real one-node Slurm cluster that this script starts
# (munged, slurmctld and slurmd as the current user, a generated slurm.conf in a temporary
# directory, every daemon stopped at the end). A replay search and a tuner search run through it
# and are checked against the same searches run locally (same candidates, same verdicts); a
# search started under Slurm resumes under the local executor; an interrupted search cancels its
# jobs. Skipped (77) without Slurm and munge (scripts/deps.sh --slurm installs them).
set -u
. tests/integration/lib.sh
. tests/agents/search_lib.sh

need() { for c in "$@"; do command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || return 1; done; }
if ! need slurmctld slurmd munged sbatch srun scancel sinfo squeue; then
	[ "$(id -u)" -eq 0 ] && scripts/deps.sh --slurm >"$tmp/deps.log" 2>&1
	need slurmctld slurmd munged sbatch srun scancel sinfo squeue || { echo "no Slurm (slurmctld, slurmd, munge); skipped"; exit 77; }
fi
PATH="$PATH:/usr/sbin"
need_verifier

d="$tmp/slurm"
mkdir -p "$d/state" "$d/spool" "$d/munge"
# munged wants its socket reachable (execute permission for all on every directory above it)
chmod 711 "$tmp" "$d"
chmod 755 "$d/munge"
host=$(hostname -s)
me=$(id -un)
# free ports for the two daemons
ports=$(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$d/munge.key"
cat >"$d/slurm.conf" <<CONF
ClusterName=kgtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=$me
SlurmdUser=$me
SlurmctldPort=$1
SlurmdPort=$2
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=kg Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF="$d/slurm.conf"

pids=""
stop_cluster() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	pids=""
}
trap 'stop_cluster; rm -rf "$tmp"' EXIT

munged --foreground --socket="$d/munge/munge.sock" --key-file="$d/munge.key" --pid-file="$d/munged.pid" \
	--log-file="$d/munged.log" --seed-file="$d/munged.seed" >"$d/munged.out" 2>&1 &
pids="$!"
for _ in $(seq 50); do [ -S "$d/munge/munge.sock" ] && break; sleep 0.1; done
slurmctld -D -i -f "$SLURM_CONF" >"$d/slurmctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -N "$host" -f "$SLURM_CONF" >"$d/slurmd.out" 2>&1 &
pids="$pids $!"
up=0
for _ in $(seq 150); do
	state=$(sinfo -h -N -o %t 2>/dev/null | head -n 1)
	case "$state" in idle*|mix*|alloc*) up=1; break ;; esac
	sleep 0.2
done
if [ $up -ne 1 ]; then
	echo "the test cluster did not come up (node state '${state:-none}'); logs:"
	tail -n 5 "$d/munged.log" "$d/slurmctld.log" "$d/slurmd.log" "$d"/*.out 2>/dev/null | sed 's/^/  | /'
	exit 77
fi
ok "cluster: one node up ($state)" true

# the replay search, through Slurm and locally
R="--agent replay --agent-opt dir=$CANDS --rounds 2 --branch 2 --candidates 2 --finalists 2 --retime 2"
"$KGATE" search softmax $R --executor slurm --jobs 2 --out "$tmp/rs" $P >"$tmp/rs.out" 2>&1
rc=$?
ok "slurm replay: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/rs.out" | sed 's/^/     | /'
ok "slurm replay: executor named" grep -q "executor slurm" "$tmp/rs.out"
ok "slurm replay: each verification a job with its script, log and report" is_true "$(python3 -c 'import glob,sys
d = sys.argv[1] + "/slurm/"
print(len(glob.glob(d + "*.sh")) == 4 + 2 and len(glob.glob(d + "*.report.json")) == 4 + 2)' "$tmp/rs")"
ok "slurm replay: the job step ran srun" grep -q "exec srun --ntasks=1 " "$(ls "$tmp"/rs/slurm/*.sh | head -n 1)"
"$KGATE" search softmax $R --out "$tmp/rl" $P >"$tmp/rl.out" 2>&1
verdicts() { hist "$1" 'sorted((e["id"], e["verdict"], tuple(sorted({r["code"] for r in e["reasons"]}))) for e in c)'; }
ok "slurm replay: same candidates and verdicts as the local run" [ "$(verdicts "$tmp/rs")" = "$(verdicts "$tmp/rl")" ]
ok "slurm replay: same winner as the local run" cmp -s "$tmp/rs/winner.c" "$tmp/rl/winner.c"
ok "slurm replay: no job left in the queue" [ -z "$(squeue -h 2>/dev/null)" ]

# the tuner search (12 settings in 3 rounds of 4: a grid, so the proposals do not depend on
# timings), round 1 through Slurm, then resumed locally (resume across executors)
T="--agent tuner --template examples/tuner/matmul.c --branch 2 --candidates 2 --seed 5 --finalists 0"
"$KGATE" search matmul $T --rounds 1 --executor slurm --out "$tmp/ts" $P >"$tmp/ts.out" 2>&1
rc=$?
ok "slurm tuner: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -n 30 "$tmp/ts.out" | sed 's/^/     | /'
"$KGATE" search matmul $T --rounds 3 --out "$tmp/ts" $P >"$tmp/ts2.out" 2>&1
rc=$?
ok "resume across executors: exit 0 (got $rc)" [ $rc -eq 0 ]
ok "resume across executors: round 1 not redone" grep -q "round 1: done in an earlier run" "$tmp/ts2.out"
ok "resume across executors: 12 settings, each verified once" is_true "$(hist "$tmp/ts" 'len(c) == 12 and len({e["id"] for e in c}) == 12')"
# (a parallel timing.tampered verdict is confirmed by a second job: at least 4)
ok "resume across executors: round 1 through Slurm" is_true "$(python3 -c 'import glob,sys
print(len(glob.glob(sys.argv[1] + "/slurm/*.report.json")) >= 4)' "$tmp/ts")"
ok "resume across executors: rounds 2 and 3 here" grep -q "executor local" "$tmp/ts2.out"
"$KGATE" search matmul $T --rounds 3 --out "$tmp/tl" $P >"$tmp/tl.out" 2>&1
ok "slurm tuner: the same settings and verdicts as the local run" [ "$(verdicts "$tmp/ts")" = "$(verdicts "$tmp/tl")" ]

# interrupted: the running jobs are cancelled, nothing stays queued
"$KGATE" search softmax $R --executor slurm --jobs 2 --out "$tmp/int" $P >"$tmp/int.out" 2>&1 &
pid=$!
for _ in $(seq 300); do [ -n "$(squeue -h 2>/dev/null)" ] && break; sleep 0.1; done
queued=$(squeue -h 2>/dev/null | wc -l)
kill -TERM $pid # (SIGINT is ignored in a background job of a non-interactive shell)
wait $pid
rc=$?
ok "interrupt: jobs were running ($queued)" [ "$queued" -ge 1 ]
ok "interrupt: exit 143, 128 + SIGTERM (got $rc)" [ $rc -eq 143 ]
ok "interrupt: says the jobs were cancelled" grep -q "Slurm jobs\? cancelled (scancel)" "$tmp/int.out"
for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
ok "interrupt: nothing left in the queue" [ -z "$(squeue -h 2>/dev/null)" ]

stop_cluster
left=0
for f in munged.pid slurmctld.pid slurmd.pid; do
	[ -f "$d/$f" ] && kill -0 "$(cat "$d/$f")" 2>/dev/null && left=1
done
ok "no daemon left running" [ $left -eq 0 ]
finish
