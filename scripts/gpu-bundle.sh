#!/bin/sh
# Packs a build for a GPU host that has the CUDA toolkit and a Python with torch but not the Debian
# libraries kgate links (the device tool's machines): the build's programs, test and bench binaries
# into .gpu/build, and the shared libraries they need, other than glibc's, into .gpu/lib.
# On the GPU host, `sh .gpu/setup.sh` puts the libraries the host lacks where the loader (and so
# every sandbox, which sees /usr and ld.so.cache) finds them; then
#   KGATE_HOME=$PWD KGATE_BUILD=.gpu/build sh tests/gpu/run.sh
# Usage: scripts/gpu-bundle.sh [BUILD]   (after `make all tests bench-bins`)
set -eu
build=${1:-build}
out=.gpu
rm -rf "$out/build" "$out/lib"
mkdir -p "$out/build" "$out/lib"
# the build without its object files and archives (the .gpu folder travels under a size cap)
(cd "$build" && find . -type f ! -name '*.o' ! -name '*.a' ! -name '*.d' -print) | while read -r f; do
	mkdir -p "$out/build/$(dirname "$f")"
	cp -p "$build/$f" "$out/build/$f"
done
# every ELF's needed libraries, resolved here, less the C library's own
find "$out/build" -type f -perm -u+x -o -type f -name '*.so' | while read -r f; do
	ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | while read -r l; do
	case "$(basename "$l")" in
	libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux* | libresolv.so.*) continue ;;
	esac
	cp -L "$l" "$out/lib/"
done
cat >"$out/setup.sh" <<'SETUP'
#!/bin/sh
# On the GPU host: install into /usr/local/lib/kgate-bundle only the libraries the host lacks (a
# host's own libssl or libcurl stays the one its Python loads), then refresh the loader's cache.
set -eu
d=/usr/local/lib/kgate-bundle
mkdir -p "$d"
here=$(dirname "$0")
for l in "$here"/lib/*; do
	n=$(basename "$l")
	ldconfig -p | grep -q " $n " || cp "$l" "$d/"
done
echo "$d" >/etc/ld.so.conf.d/zz-kgate-bundle.conf
ldconfig
echo "kgate bundle: $(ls "$d" | tr '\n' ' ')"
SETUP
chmod +x "$out/setup.sh"
du -sh "$out"
