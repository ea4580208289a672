#!/bin/sh
# Install what the build needs (Debian 12 packages, only those missing),
# then configure and build.  Usage: scripts/setup.sh [builddir [meson options...]]
# iproute2 and nftables: the fault suite's blackholed peer (network
# namespaces, veth, a dropping nftables chain).  libpmix-dev, openmpi-bin
# and mpich: libcci_wire's PMIx backend and the launchers its tests run
# under (mpirun, mpiexec.hydra); slurm-wlm and munge: the one-node Slurm
# cluster the wire suite starts for srun (no daemon is started here);
# libopenmpi-dev: perf/coll_mpi, Open MPI's collectives beside ours; all
# without their recommends (about 20 s).
set -eu
cd "$(dirname "$0")/.."

pkgs="gcc g++ pkg-config meson ninja-build libcunit1-dev libev-dev libfabric-dev libibverbs-dev librdmacm-dev python3-cffi python3-pytest iproute2 nftables"
launcher_pkgs="libpmix-dev openmpi-bin libopenmpi-dev mpich slurm-wlm munge"
missing() {
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
			printf ' %s' "$p"
	done
}
missing=$(missing $pkgs)
missing_launchers=$(missing $launcher_pkgs)
if [ -n "$missing$missing_launchers" ]; then
	echo "installing:$missing$missing_launchers"
	apt-get update -qq
fi
if [ -n "$missing" ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
fi
if [ -n "$missing_launchers" ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing_launchers
fi

builddir=${1:-build}
[ $# -gt 0 ] && shift
if [ ! -f "$builddir/build.ninja" ]; then
	meson setup "$builddir" "$@"
fi
ninja -C "$builddir"
