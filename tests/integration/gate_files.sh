#!/bin/sh
# Integration: the files kgate reads for its user are data, never links to follow. A candidate,
# task manifest, reference or policy that is a symbolic link (to a secret), a FIFO, a device, a
# directory, empty or oversized is a clear exit-2 error at once, and no byte of a file it was
# pointed at reaches a message or a report (kgate 0.1 put /etc/shadow lines and an AWS key there,
# and hung forever on a FIFO).
set -u
. tests/integration/lib.sh
secret="$tmp/creds"
printf 'aws_secret_access_key = KGSECRETKGSECRET\n' >"$secret"
chmod 600 "$secret"
mkdir -p "$tmp/c"
ln -s "$secret" "$tmp/c/kernel.c"
mkfifo "$tmp/c/fifo.c"
: >"$tmp/c/empty.c"
head -c 5000000 /dev/zero | tr '\0' 'x' >"$tmp/c/big.c"
mkdir "$tmp/c/dir.c"
mkdir -p "$tmp/real"
cp examples/softmax/online.c "$tmp/real/online.c"
ln -s "$tmp/real" "$tmp/c/linkdir"

# refused: exit 2 within seconds, the message names the problem, nothing of the secret anywhere
refused() { # refused DESCRIPTION WORDS ARGS...
	what=$1 words=$2; shift 2
	rm -f "$tmp/r.json"
	start=$(date +%s)
	timeout 20 "$KGATE" "$@" --report json:"$tmp/r.json" >"$tmp/out" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	ok "$what: exit 2 (got $rc, ${secs}s)" [ $rc -eq 2 ]
	ok "$what: says '$words'" grep -q "$words" "$tmp/out"
	ok "$what: no secret in the output" sh -c '! grep -q KGSECRET "$1"' _ "$tmp/out"
	ok "$what: no report written" [ ! -s "$tmp/r.json" ]
}
refused "symlinked candidate" "symbolic link" verify softmax "$tmp/c/kernel.c" --policy ci
refused "candidate through a symlinked directory" "symbolic link" verify softmax "$tmp/c/linkdir/online.c" --policy ci
refused "FIFO candidate" "FIFO" verify softmax "$tmp/c/fifo.c" --policy ci
refused "device candidate" "device" verify softmax /dev/zero --policy ci
refused "directory candidate" "directory" verify softmax "$tmp/c/dir.c" --policy ci
refused "empty candidate" "empty" verify softmax "$tmp/c/empty.c" --policy ci
refused "oversized candidate" "larger than" verify softmax "$tmp/c/big.c" --policy ci
ln -s "$secret" "$tmp/c/policy.yaml"
refused "symlinked policy" "symbolic link" verify softmax examples/softmax/online.c --policy "$tmp/c/policy.yaml"
refused "FIFO policy" "FIFO" verify softmax examples/softmax/online.c --policy "$tmp/c/fifo.c"

# a manifest that is a link, and references that leave the task's directory or are links
mkdir -p "$tmp/t/evil" "$tmp/t/linked" "$tmp/t/refl"
cp tasks/softmax/reference.c "$tmp/t/evil/"
ln -s "$(pwd)/tasks/softmax/task.yaml" "$tmp/t/linked/task.yaml"
refused "symlinked manifest" "symbolic link" verify "$tmp/t/linked/task.yaml" examples/softmax/online.c --policy ci
sed "s|c: reference.c|c: $secret|" tasks/softmax/task.yaml >"$tmp/t/evil/task.yaml"
refused "absolute reference path" "relative to the task" verify "$tmp/t/evil/task.yaml" examples/softmax/online.c --policy ci
sed "s|c: reference.c|c: ../../creds|" tasks/softmax/task.yaml >"$tmp/t/evil/task.yaml"
refused "reference path with .." "without '..'" verify "$tmp/t/evil/task.yaml" examples/softmax/online.c --policy ci
cp tasks/softmax/task.yaml "$tmp/t/refl/task.yaml"
ln -s "$secret" "$tmp/t/refl/reference.c"
refused "symlinked reference" "symbolic link" verify "$tmp/t/refl/task.yaml" examples/softmax/online.c --policy ci

# a policy that is not the user's: a parse error names the line, never the content
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
	printf 'kgate_policy: 1\nKGSECRETKGSECRET: 1\n' >"$tmp/foreign.yaml"
	chown nobody "$tmp/foreign.yaml"
	refused "a policy not the user's" "foreign.yaml:2" verify softmax examples/softmax/online.c --policy "$tmp/foreign.yaml"
fi
# and one of the user's own shows the offending line
printf 'kgate_policy: 1\nbogus_key: 1\n' >"$tmp/mine.yaml"
refused "the user's own policy" "unknown key 'bogus_key'" verify softmax examples/softmax/online.c --policy "$tmp/mine.yaml"

# the plain files themselves still verify
expect 0 - softmax "$tmp/real/online.c" --policy policy/ci.yaml --iterations 0
finish
