#!/bin/bash
# Connections per second on every transport built here, side by side:
#
#   perf/run_connstorm.sh BUILD_DIR [connstorm options...]
#
# Runs build/perf/connstorm (which forks its own server) once per
# transport: sm, tcp, sock, and ofi over libfabric's tcp and shm
# providers when the ofi plugin was built; the options go to every run
# (default: -n 1,100,1000,10000 -w 256).  Prints one table per transport.
# Exit status: non-zero if any run fails (a failed connect ends a run
# with its status).
set -u

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [connstorm options...]" >&2
	exit 2
fi
build=$1
shift
cs="$build/perf/connstorm"
src=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$cs" ]; then
	echo "$0: $cs not found (build first: ninja -C $build)" >&2
	exit 2
fi

runs=("sm|CCI_CTP=sm" "tcp|CCI_CTP=tcp" "sock|CCI_CTP=sock")
if [ -e "$build/plugins/ofi/cci_ctp_ofi.so" ]; then
	runs+=("ofi/tcp|CCI_CTP=ofi CCI_CONFIG=$src/tests/ofi/ofi-tcp.ini"
	       "ofi/shm|CCI_CTP=ofi CCI_CONFIG=$src/tests/ofi/ofi-shm.ini")
fi
status=0
for r in "${runs[@]}"; do
	name=${r%%|*}
	echo "## $name"
	# shellcheck disable=SC2086 # the environment words are meant to split
	if ! env ${r#*|} timeout 900 "$cs" "$@"; then
		echo "$0: connstorm failed on $name" >&2
		status=1
	fi
	echo
done
exit $status
