#!/bin/sh
# Checks the packaging sources before a build: one version everywhere (cli/main.c's KG_VERSION, the
# Debian changelog, the RPM spec, the man pages) and man pages that groff formats without warnings.
# Usage: packaging/check-sources.sh   (from the top of the tree; the build scripts run it)
set -eu
version=$(sed -n 's/^#define KG_VERSION "\(.*\)"$/\1/p' cli/main.c)
fail=0
say() { echo "check-sources.sh: $*" >&2; fail=1; }
[ -n "$version" ] || say "no KG_VERSION in cli/main.c"
deb=$(sed -n '1s/^kgate (\([^)]*\)).*/\1/p' packaging/debian/changelog)
[ "$deb" = "$version" ] || say "packaging/debian/changelog says $deb, cli/main.c $version"
rpmv=$(sed -n 's/^Version: *//p' packaging/kgate.spec)
[ "$rpmv" = "$version" ] || say "packaging/kgate.spec says $rpmv, cli/main.c $version"
for m in packaging/man/*.[1-8]; do
	grep -q "^\.TH .* \"kgate $version\"" "$m" || say "$m: the .TH line does not say \"kgate $version\""
	if command -v groff >/dev/null; then
		w=$(groff -ww -z -man "$m" 2>&1) || true
		[ -z "$w" ] || say "$m: groff warnings:
$w"
	fi
done
exit $fail
