#!/bin/sh
# Integration: the RPMs. Builds kgate and kgate-devel (packaging/build-rpm.sh, rpmbuild on the spec)
# and checks them with rpm -qp: the file list and its split, the conffiles, the declared library
# dependencies (not bundled), CUDA only recommended, no private plugin provided as a library.
# Installing them is for an RPM distribution; here rpm only queries. Skips (77) without rpmbuild.
set -u
. tests/integration/lib.sh

# has FILE LINE...: every LINE is a whole line of FILE
has() { f=$1; shift; for l; do grep -qxF -- "$l" "$f" || { echo "     missing: $l"; return 1; }; done; }
lacks() { f=$1; shift; for re; do ! grep -qE -- "$re" "$f" || { echo "     unexpected: $(grep -E -- "$re" "$f" | head -n 1)"; return 1; }; done; }

# rpm-build tools when missing and we may install them (CI starts from a bare Debian)
if ! command -v rpmbuild >/dev/null; then
	[ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null ||
		{ echo "no rpmbuild (scripts/deps.sh --packaging-min as root); skipped"; exit 77; }
	scripts/deps.sh --packaging-min >"$tmp/deps.out" 2>&1 || { tail -n 20 "$tmp/deps.out"; exit 1; }
fi
start=$(date +%s)
packaging/build-rpm.sh build-pkg dist >"$tmp/build.out" 2>&1
rc=$?
ok "packaging/build-rpm.sh (exit $rc, $(( $(date +%s) - start )) s)" [ $rc -eq 0 ]
sed 's/^/     | /' "$tmp/build.out" | tail -n 20
[ $rc -eq 0 ] || { finish; exit 1; }
version=$(sed -n 's/^Version: *//p' packaging/kgate.spec)
rpm=$(ls dist/kgate-"$version"-*.rpm | grep -v noarch | tail -n 1)
devel=$(ls dist/kgate-devel-"$version"-*.noarch.rpm | tail -n 1)

# the RPM conventions: the runner in libexecdir, the plugins in libdir (lib64 on x86_64)
libexec=$(rpm --eval '%{_libexecdir}') lib=$(rpm --eval '%{_libdir}')
rpm -qpl "$rpm" >"$tmp/files"
rpm -qpl "$devel" >"$tmp/devfiles"
ok "kgate: the program, runner, plugins, policies, header, tasks, examples, man pages" has "$tmp/files" \
	/usr/bin/kgate "$libexec/kgate/kgate-run" "$lib/kgate/plugins/replay.so" "$lib/kgate/plugins/openai.so" \
	"$lib/kgate/plugins/anthropic.so" /etc/kgate/default.yaml /etc/kgate/strict.yaml /etc/kgate/ci.yaml \
	/usr/share/kgate/include/kgate/kernel.h /usr/share/kgate/tasks/softmax/task.yaml \
	/usr/share/kgate/tasks/softmax/reference.c /usr/share/kgate/tasks/softmax/reference.cu \
	/usr/share/kgate/examples/softmax/online.c /usr/share/kgate/examples/cuda/softmax/online.cu \
	/usr/share/man/man1/kgate.1.gz /usr/share/man/man5/kgate-policy.5.gz /usr/share/man/man5/kgate-task.5.gz
ok "kgate: no development files" lacks "$tmp/files" '^/usr/include' '/proto/' '/vendor-agent' 'pkgconfig'
ok "kgate-devel: headers, kgate.proto, the sample agent, kgate.pc" has "$tmp/devfiles" /usr/include/kgate/kernel.h \
	/usr/include/kgate/agent.h /usr/share/kgate/proto/kgate.proto /usr/share/kgate/examples/vendor-agent/acme_agent.c \
	/usr/share/pkgconfig/kgate.pc
rpm -qp --configfiles "$rpm" | LC_ALL=C sort >"$tmp/conf"
ok "the policies are %config" has "$tmp/conf" /etc/kgate/ci.yaml /etc/kgate/default.yaml /etc/kgate/strict.yaml

rpm -qp --requires "$rpm" >"$tmp/req"
sed 's/^/     | /' "$tmp/req" | grep -v 'GLIBC_\|rpmlib('
ok "kgate requires the system libraries by soname" has "$tmp/req" 'libseccomp.so.2()(64bit)' \
	'libcap.so.2()(64bit)' 'libyaml-0.so.2()(64bit)' 'libjansson.so.4()(64bit)' 'libcurl.so.4()(64bit)' \
	'libprotobuf-c.so.1()(64bit)' gcc glibc-devel
ok "kgate requires no CUDA" lacks "$tmp/req" '[Cc][Uu][Dd][Aa]'
rpm -qp --recommends "$rpm" >"$tmp/rec"
ok "the CUDA toolkit is recommended" has "$tmp/rec" cuda-toolkit
rpm -qp --provides "$rpm" >"$tmp/prov"
ok "the private plugins are not provided as libraries" lacks "$tmp/prov" '\.so'
rpm -qp --requires "$devel" >"$tmp/devreq"
ok "kgate-devel requires this kgate" has "$tmp/devreq" "kgate = $(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$rpm")"
finish
