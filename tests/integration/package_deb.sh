#!/bin/sh
# Integration: the .deb as an operator gets it. Builds kgate and kgate-dev (packaging/build-deb.sh),
# installs kgate, verifies an installed example with the installed default policy, adds kgate-dev
# and builds the sample agent against it, then removes and purges both and checks that nothing of
# kgate is left. Root only (77 otherwise); a trap purges kgate again whatever happens midway.
set -u
. tests/integration/lib.sh
[ "$(id -u)" -eq 0 ] || { echo "not root: cannot install packages; skipped"; exit 77; }
command -v dpkg >/dev/null && command -v dpkg-deb >/dev/null || { echo "no dpkg; skipped"; exit 77; }

absent() { for p; do [ ! -e "$p" ] || { echo "     left behind: $p"; return 1; }; done; }
status() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null; }
known() { s=$(status "$1"); [ -n "$s" ] && [ "$s" != not-installed ]; }
is_status() { [ "$(status "$1")" = "$2" ]; }

# One run at a time on this machine: the packages are installed system-wide.
exec 8>/tmp/kgate-package-test.lock
flock 8
# An operator's installation (or its kept configuration) is never replaced or purged by a test.
if known kgate || known kgate-dev || [ -e /usr/bin/kgate ] || [ -e /etc/kgate ]; then
	echo "kgate is installed here (dpkg: '$(status kgate)'; or /usr/bin/kgate, /etc/kgate exist): not touching it; skipped"
	exit 77
fi

installed=0
cleanup() {
	if [ $installed = 1 ]; then
		dpkg -P kgate-dev kgate >/dev/null 2>&1 || echo "cleanup: dpkg -P kgate-dev kgate failed"
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# Where the build tree's kgate cannot verify here either (no sandbox support, say), the installed
# one is not asked to: the package is still built, installed, checked and removed.
can_verify=1
if [ -x "$B/kgate" ]; then
	"$B/kgate" verify softmax examples/softmax/online.c --policy policy/ci.yaml --iterations 0 --quiet \
		>"$tmp/precheck" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		can_verify=0
		echo "note: $B/kgate cannot verify here either (exit $rc): verification checks left out"
		tail -n 3 "$tmp/precheck" | sed 's/^/     | /'
	fi
fi

# Build tools (dpkg-dev) when missing: CI starts from a bare Debian.
command -v dpkg-shlibdeps >/dev/null || scripts/deps.sh --packaging-min >"$tmp/deps.out" 2>&1 ||
	{ tail -n 20 "$tmp/deps.out"; exit 1; }
start=$(date +%s)
packaging/build-deb.sh build-pkg dist >"$tmp/build.out" 2>&1
rc=$?
ok "packaging/build-deb.sh (exit $rc, $(( $(date +%s) - start )) s)" [ $rc -eq 0 ]
sed 's/^/     | /' "$tmp/build.out" | grep -v "root privileges" | tail -n 20
[ $rc -eq 0 ] || { finish; exit 1; }
deb=$(ls dist/kgate_*_"$(dpkg --print-architecture)".deb | tail -n 1)
devdeb=$(ls dist/kgate-dev_*_all.deb | tail -n 1)
version=$(dpkg-deb -f "$deb" Version)

# apt-get resolves the library dependencies (already there where kgate was built); never the
# recommended CUDA toolkit.
install_debs() {
	installed=1
	if command -v apt-get >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >"$tmp/apt.out" 2>&1
	else
		dpkg -i "$@" >"$tmp/apt.out" 2>&1
	fi
	rc=$?
	[ $rc -eq 0 ] || tail -n 20 "$tmp/apt.out" | sed 's/^/     | /'
	return $rc
}
ok "kgate $version installs" install_debs "$(pwd)/$deb"
ok "dpkg says kgate is installed" is_status kgate installed
conffiles() { dpkg-query -W -f='${Conffiles}\n' kgate | awk 'NF {print $1}' | LC_ALL=C sort | tr '\n' ' '; }
ok "the policies are conffiles" [ "$(conffiles)" = "/etc/kgate/ci.yaml /etc/kgate/default.yaml /etc/kgate/strict.yaml " ]

# The installed kgate alone: no source tree, no environment pointing into one, an empty cwd.
top=$(pwd)
mkdir -p "$tmp/cwd"
cd "$tmp/cwd" || exit 1
unset KGATE_HOME KGATE_TASKS KGATE_RUNNER KGATE_PLUGINDIR KGATE_BUILD
KGATE=/usr/bin/kgate
ok "kgate version says $version" sh -c "/usr/bin/kgate version | grep -q '^kgate $version '"
/usr/bin/kgate doctor >"$tmp/doctor.out" 2>&1
rc=$?
sed 's/^/     | /' "$tmp/doctor.out"
ok "kgate doctor (exit $rc)" [ $rc -eq 0 ]
ok "doctor finds the installed runner" grep -q '^  runner    /usr/lib/kgate/kgate-run$' "$tmp/doctor.out"
ok "doctor finds the runtime candidate header" grep -q '^  headers   /usr/share/kgate/include$' "$tmp/doctor.out"
ok "kgate tasks lists the installed tasks" sh -c "/usr/bin/kgate tasks | grep -q '^softmax '"

if [ $can_verify = 1 ]; then
	# the issue's command: an installed example, the installed default policy, the small shapes
	expect 0 - softmax /usr/share/kgate/examples/softmax/online.c --policy default --shape-set ci
	ok "the report names /etc/kgate/default.yaml" grep -q '"policy": *"/etc/kgate/default.yaml"' \
		"$tmp/report-$checked.json"
	expect 1 check.nan softmax /usr/share/kgate/examples/softmax/wrong_no_max.c --policy ci --iterations 0
	# the built-in agents load from /usr/lib/kgate/plugins
	mkdir -p "$tmp/cands"
	cp /usr/share/kgate/examples/softmax/online.c "$tmp/cands/"
	/usr/bin/kgate search softmax --agent replay --agent-opt dir="$tmp/cands" --rounds 1 --branch 1 \
		--candidates 1 --policy ci --iterations 0 --out "$tmp/search" >"$tmp/search.out" 2>&1
	rc=$?
	ok "kgate search with the installed replay plugin finds a winner (exit $rc)" \
		sh -c "[ $rc -eq 0 ] && cmp -s '$tmp/search/winner.c' /usr/share/kgate/examples/softmax/online.c"
	[ $rc -eq 0 ] || tail -n 20 "$tmp/search.out" | sed 's/^/     | /'
fi
if command -v man >/dev/null; then
	ok "man pages kgate(1), kgate-policy(5), kgate-task(5)" sh -c \
		'man -w kgate >/dev/null && man -w 5 kgate-policy >/dev/null && man -w 5 kgate-task >/dev/null'
fi

# kgate-dev: a vendor builds the sample agent from the installed files only
ok "kgate-dev installs" install_debs "$top/$devdeb"
ok "kgate-dev ships the public headers, kgate.proto and kgate.pc" \
	test -f /usr/include/kgate/kernel.h -a -f /usr/include/kgate/agent.h -a -f /usr/share/kgate/proto/kgate.proto \
	-a -f /usr/share/pkgconfig/kgate.pc
ok "pkg-config finds kgate's proto directory" sh -c \
	'[ "$(pkg-config --variable=protodir kgate)" = /usr/share/kgate/proto ]'
if command -v protoc-c >/dev/null && pkg-config --exists libprotobuf-c 2>/dev/null; then
	cp -r /usr/share/kgate/examples/vendor-agent "$tmp/vendor"
	make --no-print-directory -C "$tmp/vendor" >"$tmp/vendor.out" 2>&1
	rc=$?
	ok "the sample agent builds as it is (its default PREFIX, kgate.pc) (exit $rc)" [ -f "$tmp/vendor/libacme-agent.so" ]
	[ $rc -eq 0 ] || tail -n 20 "$tmp/vendor.out" | sed 's/^/     | /'
fi

# remove keeps the edited conffiles, purge takes them; nothing else may stay
echo "# local edit" >>/etc/kgate/ci.yaml
ok "dpkg -r kgate-dev kgate" sh -c 'dpkg -r kgate-dev kgate >/dev/null 2>&1'
ok "after remove: the program, its files and the docs are gone" absent /usr/bin/kgate /usr/lib/kgate \
	/usr/share/kgate /usr/include/kgate /usr/share/doc/kgate /usr/share/doc/kgate-dev \
	/usr/share/man/man1/kgate.1.gz /usr/share/man/man5/kgate-policy.5.gz /usr/share/man/man5/kgate-task.5.gz \
	/usr/share/lintian/overrides/kgate /usr/share/lintian/overrides/kgate-dev /usr/share/pkgconfig/kgate.pc
ok "after remove: the edited policy stays" grep -q '^# local edit$' /etc/kgate/ci.yaml
ok "after remove: kgate is in state config-files" is_status kgate config-files
ok "dpkg -P kgate" sh -c 'dpkg -P kgate >/dev/null 2>&1'
installed=0
ok "after purge: /etc/kgate is gone" absent /etc/kgate
forgotten() { ! known kgate && ! known kgate-dev; }
ok "after purge: dpkg knows neither package" forgotten
finish
