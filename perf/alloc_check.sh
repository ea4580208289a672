#!/bin/bash
# Checks that the data path does not allocate: runs pingpong (through
# run_pingpong.sh, both sides under malloc_count.so) with a small and a
# large iteration count and compares the heap calls of the two runs.  The
# set-up work is the same in both, so any difference comes from messages.
#
#   perf/alloc_check.sh BUILD_DIR [pingpong client options...]
#
# Without options it checks messages, RMA write and RMA read in turn.
# Prints "allocations per message: X" per mode; exits non-zero if the
# large run made more heap calls than the small one (ALLOC_SLACK extra
# calls are tolerated, default 0).
set -u

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [pingpong options...]" >&2
	exit 2
fi
build=$1
shift
here=$(dirname "$0")
so=$(realpath "$build/perf/malloc_count.so") || exit 2
small=${ALLOC_SMALL:-1000}
large=${ALLOC_LARGE:-100000}
slack=${ALLOC_SLACK:-0}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alloc_check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Heap calls (allocations and frees) of both pingpong processes.
heap_calls() {
	awk '/^malloc_count\[pingpong / {
		for (i = 3; i <= NF; i++) { split($i, kv, "="); n += kv[2] }
	} END { print n + 0 }' "$1"
}

# Messages moved by the timed loops: two per round trip (the
# ping and its echo, or the RMA and its completion), from the JSON rows.
messages() {
	awk -F'"iters":' 'NF > 1 { split($2, v, ","); n += 2 * v[1] } END { print n + 0 }' "$1"
}

# run ITERS OUT_PREFIX options...  (-A: pingpong's batch medians sort an
# array per size whose length grows with ITERS, and qsort may allocate for
# it; the mean keeps pingpong's own heap use independent of ITERS.)
run() {
	local iters=$1 out=$2
	shift 2
	MALLOC_COUNT=1 PINGPONG_WRAPPER="env LD_PRELOAD=$so" \
		"$here/run_pingpong.sh" "$build" --json -A -i "$iters" "$@" \
		>"$out.json" 2>"$out.err" || { cat "$out.err" >&2; return 1; }
}

check_mode() {
	run "$small" "$tmp/small" "$@" || return 1
	run "$large" "$tmp/large" "$@" || return 1
	local a1 a2 m1 m2
	a1=$(heap_calls "$tmp/small.err")
	a2=$(heap_calls "$tmp/large.err")
	m1=$(messages "$tmp/small.json")
	m2=$(messages "$tmp/large.json")
	echo "pingpong $*: heap calls $a1 ($m1 messages) vs $a2 ($m2 messages)"
	awk -v a1="$a1" -v a2="$a2" -v m1="$m1" -v m2="$m2" 'BEGIN {
		printf "allocations per message: %.6f\n", (m2 > m1) ? (a2 - a1) / (m2 - m1) : 0 }'
	if [ "$m2" -le "$m1" ] || [ "$a1" -eq 0 ]; then
		echo "$0: the runs did not measure anything (is malloc_count loaded?)" >&2
		return 1
	fi
	if [ $((a2 - a1)) -gt "$slack" ]; then
		echo "$0: FAIL: heap calls grow with the number of messages" >&2
		return 1
	fi
}

rc=0
if [ $# -gt 0 ]; then
	check_mode "$@" || rc=1
else
	check_mode || rc=1
	check_mode -w -m 64k || rc=1
	check_mode -r -m 64k || rc=1
fi
exit $rc
