#!/bin/sh
# Builds OUT/kgate-VERSION-1.ARCH.rpm, OUT/kgate-devel-VERSION-1.noarch.rpm and the source RPM (to
# rebuild on an RPM distribution: rpmbuild --rebuild) with packaging/kgate.spec, from a tarball of
# the working tree (tracked and untracked files, not the ignored ones); rpmlint when installed.
# Usage: packaging/build-rpm.sh [BUILD [OUT]]   (from the top of the tree; `make rpm` runs it)
set -eu
build=${1:-build-pkg}
out=${2:-dist}
top=$(pwd)
[ -f packaging/kgate.spec ] || { echo "build-rpm.sh: run from the top of the kgate tree" >&2; exit 2; }
command -v rpmbuild >/dev/null || { echo "build-rpm.sh: rpmbuild missing (scripts/deps.sh --packaging)" >&2; exit 2; }

mkdir -p "$build" "$out"
exec 9>"$build/.pkg.lock"   # one package build at a time in BUILD (see build-deb.sh)
flock 9

packaging/check-sources.sh
version=$(sed -n 's/^Version: *//p' packaging/kgate.spec)

# The tarball rpmbuild unpacks: what git would commit now, or the tree without build outputs.
topdir="$top/$build/rpm"
rm -rf "$topdir"
mkdir -p "$topdir/SOURCES" "$topdir/tree/kgate-$version"
if git rev-parse --git-dir >/dev/null 2>&1; then
	# (never this build directory or dist/, even where .gitignore does not list them)
	git ls-files -z --cached --others --exclude-standard | tr '\0' '\n' | while IFS= read -r f; do
		case "$f" in "$build"/* | dist/*) continue ;; esac
		[ -e "$f" ] && printf '%s\n' "$f"
	done | tar -cf - -T - | tar -xf - -C "$topdir/tree/kgate-$version"
else
	tar -cf - --exclude="./$build" --exclude=./build --exclude=./build-san --exclude=./dist --exclude-vcs . | tar -xf - -C "$topdir/tree/kgate-$version"
fi
tar -czf "$topdir/SOURCES/kgate-$version.tar.gz" -C "$topdir/tree" "kgate-$version"

# Where rpm does not own the system (Debian), the BuildRequires cannot be looked up (--nodeps),
# and Debian's brp-compress needs bash (read -d) though it says #!/bin/sh.
set -- --define "_topdir $topdir" --define "_smp_mflags -j$(nproc)" \
	--define "packager kgate maintainers <maintainers@users.noreply.a-seed-4426059b.example>"
if ! rpm -q rpm >/dev/null 2>&1; then
	set -- "$@" --nodeps --define "__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}"
fi
MAKEFLAGS= rpmbuild -ba "$@" packaging/kgate.spec >"$topdir.log" 2>&1 || {
	tail -n 40 "$topdir.log" >&2
	echo "build-rpm.sh: rpmbuild failed; log in $topdir.log" >&2
	exit 1
}
rpms=$(find "$topdir/RPMS" "$topdir/SRPMS" -name '*.rpm' | LC_ALL=C sort)
for r in $rpms; do
	rm -f "$out/$(basename "$r")"
	cp "$r" "$out/"
done
echo "built" $(for r in $rpms; do echo "$out/$(basename "$r")"; done)

if command -v rpmlint >/dev/null; then
	# errors fail the build (rpmlint exits non-zero on them); warnings are printed for the record
	rpmlint -c packaging/rpmlint.toml $(for r in $rpms; do echo "$out/$(basename "$r")"; done)
else
	echo "rpmlint not installed (scripts/deps.sh --packaging): packages not linted"
fi
