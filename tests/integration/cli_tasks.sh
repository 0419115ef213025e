#!/bin/sh
# Integration: `kgate tasks` lists what kgate verify resolves by name, through the same search path
# ($KGATE_TASKS, $KGATE_HOME/tasks, DATADIR/tasks, ./tasks): a task under ./tasks of the working
# directory is listed (kgate 0.1 missed it); a name in two directories is listed once, from the
# first; unknown options and arguments are usage errors (exit 2).
set -u
. tests/integration/lib.sh
K=$(cd "$(dirname "$KGATE")" && pwd)/$(basename "$KGATE")
src=$(pwd)/tasks/softmax

# ./tasks only: KGATE_HOME points at a tree without tasks, KGATE_TASKS is unset
mkdir -p "$tmp/home" "$tmp/work/tasks/local_softmax"
cp "$src/task.yaml" "$src/reference.c" "$src/reference.cu" "$src/baseline.py" "$tmp/work/tasks/local_softmax/"
out=$(cd "$tmp/work" && env -u KGATE_TASKS KGATE_HOME="$tmp/home" "$K" tasks 2>&1)
rc=$?
ok "tasks from ./tasks: exit 0 (got $rc)" [ $rc -eq 0 ]
[ $rc -eq 0 ] || echo "$out" | sed 's/^/     | /'
ok "tasks from ./tasks: local_softmax is listed" sh -c 'echo "$1" | grep -q "^local_softmax  *softmax over"' _ "$out"
# and verify resolves the same name from the same place (a usage error would be exit 2)
(cd "$tmp/work" && env -u KGATE_TASKS KGATE_HOME="$tmp/home" "$K" verify local_softmax missing.c --quiet \
	>"$tmp/verify.out" 2>&1)
ok "verify resolves local_softmax (only the candidate is missing)" grep -q "candidate missing.c" "$tmp/verify.out"

# the same name in $KGATE_TASKS and ./tasks: listed once, $KGATE_TASKS first
mkdir -p "$tmp/env/local_softmax"
sed 's/^description: .*/description: the copy in KGATE_TASKS/' "$src/task.yaml" >"$tmp/env/local_softmax/task.yaml"
cp "$src/reference.c" "$src/reference.cu" "$src/baseline.py" "$tmp/env/local_softmax/"
out=$(cd "$tmp/work" && KGATE_TASKS="$tmp/env" KGATE_HOME="$tmp/home" "$K" tasks 2>&1)
ok "a name in two directories is listed once" [ "$(echo "$out" | grep -c '^local_softmax ')" -eq 1 ]
ok "the first directory wins" sh -c 'echo "$1" | grep -q "^local_softmax  *the copy in KGATE_TASKS"' _ "$out"

# the tree's own tasks through KGATE_HOME, in name order
out=$("$K" tasks 2>&1)
ok "KGATE_HOME tasks listed in order" [ "$(echo "$out" | awk '{print $1}' | tr '\n' ' ')" = "conv_relu_pool layernorm matmul softmax " ]

# nothing anywhere: exit 2 (unless an installed kgate's tasks are in DATADIR, named by --help)
datadir=$("$K" tasks --help | grep -o '[^ ]*/tasks, ./tasks' | cut -d, -f1)
if [ -n "$datadir" ] && [ ! -d "$datadir" ]; then
	out=$(cd "$tmp/home" && env -u KGATE_TASKS KGATE_HOME="$tmp/home" "$K" tasks 2>&1)
	rc=$?
	ok "no tasks: exit 2 (got $rc)" [ $rc -eq 2 ]
fi

"$K" tasks --bogus >/dev/null 2>&1
rc=$?
ok "tasks --bogus: exit 2 (got $rc)" [ $rc -eq 2 ]
"$K" tasks softmax >/dev/null 2>&1
rc=$?
ok "tasks with an argument: exit 2 (got $rc)" [ $rc -eq 2 ]
"$K" tasks --help >"$tmp/help" 2>&1
rc=$?
ok "tasks --help: exit 0 (got $rc)" [ $rc -eq 0 ]
ok "tasks --help names ./tasks" grep -q "./tasks" "$tmp/help"
finish
