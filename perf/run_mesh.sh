#!/bin/bash
# All-to-all wire-up on every transport built here, N ranks at a time:
#
#   perf/run_mesh.sh BUILD_DIR [-n LIST] [-t SECS] [-p PLOT.png]
#
# Starts build/perf/mesh under build/wire/cci_wire_launch for each N of
# LIST (default 8,32,64) on sm, tcp, sock, and ofi over libfabric's tcp and
# shm providers when the ofi plugin was built.  Prints one table: N, the
# device, the wire-up seconds of the slowest rank, the resident KiB the
# mesh cost all ranks together, and that per connection end (each
# connection has two ends).  With -p,
# gnuplot draws both against N into PLOT.png.  Exit status: non-zero if
# any mesh did not complete within SECS (default 120; its ranks name the
# peers they lacked).
set -u

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [-n LIST] [-t SECS] [-p PLOT.png]" >&2
	exit 2
fi
build=$1
shift
counts=8,32,64 secs=120 plot=
while getopts n:t:p: opt; do
	case $opt in
	n) counts=$OPTARG ;;
	t) secs=$OPTARG ;;
	p) plot=$OPTARG ;;
	*) exit 2 ;;
	esac
done
src=$(cd "$(dirname "$0")/.." && pwd)
mesh="$build/perf/mesh" launch="$build/wire/cci_wire_launch"
for f in "$mesh" "$launch"; do
	if [ ! -x "$f" ]; then
		echo "$0: $f not found (build first: ninja -C $build)" >&2
		exit 2
	fi
done

runs=("sm|CCI_CTP=sm" "tcp|CCI_CTP=tcp" "sock|CCI_CTP=sock")
if [ -e "$build/plugins/ofi/cci_ctp_ofi.so" ]; then
	runs+=("ofi/tcp|CCI_CTP=ofi CCI_CONFIG=$src/tests/ofi/ofi-tcp.ini"
	       "ofi/shm|CCI_CTP=ofi CCI_CONFIG=$src/tests/ofi/ofi-shm.ini")
fi
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
status=0
printf '%6s %-12s %9s %12s %12s\n' ranks transport seconds KiB KiB/end
for r in "${runs[@]}"; do
	name=${r%%|*}
	for n in ${counts//,/ }; do
		# shellcheck disable=SC2086 # the environment words are meant to split
		if ! row=$(env ${r#*|} "$launch" -n "$n" -t $((secs + 30)) "$mesh" -t "$secs"); then
			echo "$0: the mesh of $n ranks over $name did not complete" >&2
			status=1
			continue
		fi
		# shellcheck disable=SC2086 # the row's fields are meant to split
		set -- $row
		printf '%6s %-12s %9s %12s %12s\n' "$1" "$name" "$3" "$4" "$5"
		echo "$1 $3 $5" >>"$data/${name//\//-}.dat"
	done
done

if [ -n "$plot" ]; then
	if ! command -v gnuplot >/dev/null; then
		echo "$0: no plot: gnuplot is not installed (Debian: gnuplot-nox)" >&2
		exit $status
	fi
	term=png
	gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 && term=pngcairo
	{
		echo "set terminal $term size 1100,450"
		echo "set output '$plot'"
		echo "set multiplot layout 1,2"
		echo "set key top left; set grid; set xlabel 'ranks (all-to-all)'"
		echo "set logscale y"
		for panel in "2:wire-up time of the slowest rank (s)" "3:resident KiB per connection end"; do
			col=${panel%%:*}
			echo "set ylabel '${panel#*:}'"
			printf "plot "
			sep=
			for f in "$data"/*.dat; do
				t=$(basename "$f" .dat)
				printf "%s'%s' using 1:%s with linespoints title '%s'" "$sep" "$f" "$col" "$t"
				sep=", "
			done
			echo
		done
		echo "unset multiplot"
	} >"$data/plot.gp"
	if gnuplot "$data/plot.gp"; then
		echo "plot: $plot"
	else
		echo "$0: gnuplot failed" >&2
		status=1
	fi
fi
exit $status
