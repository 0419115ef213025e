#!/bin/sh
# Builds OUT/kgate_VERSION_ARCH.deb and OUT/kgate-dev_VERSION_all.deb: a PREFIX=/usr build in BUILD,
# `make install` into a staging tree, split in two, then what debhelper would do (strip, compress
# docs and man pages, conffiles, md5sums, dpkg-shlibdeps) and dpkg-deb; lintian when installed.
# Usage: packaging/build-deb.sh [BUILD [OUT]]   (from the top of the tree; `make deb` runs it)
set -eu
build=${1:-build-pkg}
out=${2:-dist}
top=$(pwd)
[ -f packaging/debian/control ] || { echo "build-deb.sh: run from the top of the kgate tree" >&2; exit 2; }
for t in dpkg-deb dpkg-gencontrol dpkg-shlibdeps dpkg-parsechangelog; do
	command -v $t >/dev/null || { echo "build-deb.sh: $t missing (scripts/deps.sh --packaging)" >&2; exit 2; }
done

# One build at a time in BUILD (make deb, make rpm and the package tests share it).
mkdir -p "$build" "$out"
exec 9>"$build/.pkg.lock"
flock 9

packaging/check-sources.sh
version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
arch=$(dpkg --print-architecture)

# The paths are compiled in (see the top Makefile's DEFS); the file prefix map keeps the build
# directory out of the binaries.
stage="$top/$build/deb"
rm -rf "$stage"
make --no-print-directory -j"$(nproc)" BUILD="$build" PREFIX=/usr BINDIR=/usr/bin LIBDIR=/usr/lib \
	LIBEXECDIR=/usr/lib/kgate PLUGINDIR=/usr/lib/kgate/plugins INCLUDEDIR=/usr/include \
	DATADIR=/usr/share/kgate SYSCONFDIR=/etc/kgate MANDIR=/usr/share/man \
	CFLAGS="-ffile-prefix-map=$top=." DESTDIR="$stage/root" install >"$stage.log" 2>&1 || {
	tail -n 40 "$stage.log" >&2
	echo "build-deb.sh: build failed; log in $stage.log" >&2
	exit 1
}

# Split: the -dev package gets what vendors build plugins with, kgate the rest.
# The package trees sit where dpkg-shlibdeps expects them: debian/PACKAGE under a scratch
# directory that links our control and changelog (the dpkg-dev tools read them from ./debian).
rt="$stage/src/debian/kgate" dev="$stage/src/debian/kgate-dev"
mkdir -p "$rt" "$dev/usr/share/kgate/examples"
cp -a "$stage/root/." "$rt/"
mv "$rt/usr/include" "$dev/usr/"
mv "$rt/usr/share/kgate/proto" "$dev/usr/share/kgate/"
mv "$rt/usr/share/kgate/examples/vendor-agent" "$dev/usr/share/kgate/examples/"
mv "$rt/usr/share/pkgconfig" "$dev/usr/share/"

# As dh_strip: no debug info, .comment or .note in the shipped ELF files; executables lose every
# symbol, the plugins (and the torch runner's filter library) all but the dynamic ones they are
# loaded by. (No -dbgsym package yet.)
for f in "$rt/usr/bin/kgate" "$rt/usr/lib/kgate/kgate-run" "$rt/usr/lib/kgate/kgate-device"; do
	strip --remove-section=.comment --remove-section=.note "$f"
done
for f in "$rt"/usr/lib/kgate/plugins/*.so "$rt/usr/lib/kgate/libkgate-filter.so"; do
	strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
done

for p in kgate kgate-dev; do
	d="$stage/src/debian/$p"
	doc="$d/usr/share/doc/$p"
	mkdir -p "$doc"
	cp packaging/debian/copyright "$doc/"
	gzip -9nc packaging/debian/changelog >"$doc/changelog.gz"
	install -D -m 0644 packaging/debian/$p.lintian-overrides "$d/usr/share/lintian/overrides/$p"
done
cp README.md "$rt/usr/share/doc/kgate/README.md"
cp docs/report.md "$rt/usr/share/doc/kgate/report.md"
cp tasks/README.md "$rt/usr/share/doc/kgate/tasks.md"
cp policy/SCHEMA.md "$rt/usr/share/doc/kgate/policy-schema.md"
# As dh_compress: docs over 4 kB and every man page gzipped, reproducibly.
find "$rt/usr/share/doc" -type f -name '*.md' -size +4k -exec gzip -9n {} +
find "$rt/usr/share/man" -type f -exec gzip -9n {} +

# As dh_fixperms: directories 0755, files 0644 (shared objects too), executables 0755.
for d in "$rt" "$dev"; do
	find "$d" -type d -exec chmod 0755 {} +
	find "$d" -type f -exec chmod 0644 {} +
done
chmod 0755 "$rt/usr/bin/kgate" "$rt/usr/lib/kgate/kgate-run" "$rt/usr/lib/kgate/kgate-device"

# Control files: library dependencies computed from the ELF files, md5sums as dh_md5sums.
ln -s "$top/packaging/debian/control" "$top/packaging/debian/changelog" "$stage/src/debian/"
mkdir -p "$rt/DEBIAN" "$dev/DEBIAN"  # dpkg-shlibdeps finds a package's root by its DEBIAN
(
	cd "$stage/src"
	dpkg-shlibdeps -Tdebian/kgate.substvars debian/kgate/usr/bin/kgate debian/kgate/usr/lib/kgate/kgate-run debian/kgate/usr/lib/kgate/kgate-device \
		debian/kgate/usr/lib/kgate/plugins/*.so debian/kgate/usr/lib/kgate/libkgate-filter.so
	for p in kgate kgate-dev; do
		dpkg-gencontrol -p"$p" -Pdebian/"$p" -Tdebian/"$p".substvars
		(cd "debian/$p" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' | sed 's|^\./||' |
			LC_ALL=C sort | xargs -r md5sum) >"debian/$p/DEBIAN/md5sums"
	done
)
# The policies are conffiles: dpkg keeps an operator's edits on upgrade, removes them on purge.
(cd "$rt" && find etc -type f | sed 's|^|/|' | LC_ALL=C sort) >"$rt/DEBIAN/conffiles"

rm -f "$out/kgate_${version}_$arch.deb" "$out/kgate-dev_${version}_all.deb"
dpkg-deb --root-owner-group -Zxz --build "$rt" "$out/kgate_${version}_$arch.deb" >/dev/null
dpkg-deb --root-owner-group -Zxz --build "$dev" "$out/kgate-dev_${version}_all.deb" >/dev/null
echo "built $out/kgate_${version}_$arch.deb $out/kgate-dev_${version}_all.deb"

if command -v lintian >/dev/null; then
	# errors fail the build; warnings and below are printed for the record
	lintian --fail-on error --tag-display-limit 0 "$out/kgate_${version}_$arch.deb" \
		"$out/kgate-dev_${version}_all.deb"
	echo "lintian: no errors"
else
	echo "lintian not installed (scripts/deps.sh --packaging): packages not linted"
fi
