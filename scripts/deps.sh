#!/bin/sh
# Installs the Debian packages kgate builds and tests with. As root it runs apt-get; otherwise it
# prints the exact command and fails, so that a missing package is never a mystery later.
# python3-torch (CPU) runs PyTorch module tasks' trusted reference (runner/torch_runner.py) under
# /usr/bin/python3, and ModelNew candidates; a ModelNew's load_inline C++ extensions
# (runner/torch_build.py) are built with g++ against torch's headers and libraries (libtorch-dev),
# which include pybind11's (pybind11-dev) and Python's (python3-dev), and kept apart with binutils;
# torch.utils.cpp_extension, which a ModelNew imports for load_inline, imports setuptools.
# `kgate doctor` names any of them missing; their tests skip, naming it, where one is.
# Usage: scripts/deps.sh [--packaging | --packaging-min | --slurm]   (--packaging adds what `make deb` and
# `make rpm` build and lint with; --packaging-min only the build tools, for the package tests;
# --slurm the Slurm daemons and client that tests/integration/search_slurm.sh starts a cluster with;
# --fuzz AFL++ for `make fuzz`, never needed by `make test`, which replays the corpus without it)
set -eu

pkgs="gcc libc6-dev make pkg-config libseccomp-dev libcap-dev libprotobuf-c-dev protobuf-c-compiler
libcurl4-openssl-dev libyaml-dev libjansson-dev libcmocka-dev python3 binutils
python3-torch python3-numpy g++ libtorch-dev pybind11-dev python3-dev
python3-setuptools"
case "${1:-}" in
--packaging) pkgs="$pkgs dpkg-dev rpm lintian rpmlint groff-base man-db" ;;
--packaging-min) pkgs="$pkgs dpkg-dev rpm" ;;
--slurm) pkgs="$pkgs slurmctld slurmd slurm-client munge" ;; # the Slurm executor's tests (a one-node cluster)
--fuzz) pkgs="$pkgs afl++" ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "deps.sh: not a Debian system; install the equivalents of: $pkgs" >&2
	exit 0
fi

missing=""
for p in $pkgs; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -eq 0 ]; then
	echo "deps.sh: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || true
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
else
	echo "deps.sh: missing packages; run as root:" >&2
	echo "  sudo apt-get update && sudo $cmd" >&2
	exit 1
fi
