#!/bin/sh
# Install what the build needs (Debian 12 packages, only those missing),
# then configure and build.  Usage: scripts/setup.sh [builddir [meson options...]]
# iproute2 and nftables: the fault suite's blackholed peer (network
# namespaces, veth, a dropping nftables chain).
set -eu
cd "$(dirname "$0")/.."

pkgs="gcc g++ pkg-config meson ninja-build libcunit1-dev libev-dev libfabric-dev libibverbs-dev librdmacm-dev python3-cffi python3-pytest iproute2 nftables"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "installing:$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi

builddir=${1:-build}
[ $# -gt 0 ] && shift
if [ ! -f "$builddir/build.ninja" ]; then
	meson setup "$builddir" "$@"
fi
ninja -C "$builddir"
