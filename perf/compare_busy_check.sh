#!/usr/bin/env bash
# perf/compare_busy_check.sh BUILD_DIR - perf/compare --busy does what it
# says: the spinners run while the benchmarks do (time-sharing class, on
# the client's core when the sides are pinned), a --quick --busy 1 run
# produces every table and says the load it ran under in tables.txt and
# raw.tsv, with the under-load targets, and no spinner outlives the script,
# whether it ends normally or by SIGTERM in the middle of the run.
# No timing is judged.  Exit status 0 when all of that holds.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: compare_busy_check.sh BUILD_DIR}" && pwd)
spin=$build/perf/spin
work=$(mktemp -d "${TMPDIR:-/tmp}/cci-compare-busy.XXXXXX")
cpid=
cleanup() {
	if [ -n "$cpid" ] && kill -0 "$cpid" 2>/dev/null; then
		kill "$cpid" 2>/dev/null || true
		wait "$cpid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "compare_busy_check: FAIL: $*" >&2
	exit 1
}

# alive PID: PID runs (a child that exited but is not reaped yet is a
# zombie, which kill -0 still finds).
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $st != Z* ]]
}

# spinners PID: the pids of the spinners of the compare run PID (spin
# takes its parent's pid as its argument).
spinners() {
	pgrep -f "^$spin $1\$" || true
}

# wait_spinners PID N: until run PID has N spinners (at most 120 s: the
# script may install tools before it starts them).
wait_spinners() {
	local i
	for i in $(seq 1 1200); do
		[ "$(spinners "$1" | wc -l)" -eq "$2" ] && return 0
		alive "$1" || fail "compare exited before its $2 spinner(s) ran"
		sleep 0.1
		: "$i"
	done
	fail "compare did not start $2 spinner(s) in 120 s"
}

# wait_exit PID: its exit status, failing after 90 s (a job in flight
# when a signal comes runs to its end, at most the quick time limit).
wait_exit() {
	local i
	for i in $(seq 1 900); do
		alive "$1" || break
		sleep 0.1
		: "$i"
	done
	alive "$1" && fail "compare still runs 90 s after SIGTERM"
	wait "$1"
}

# no_survivor PID WHEN: no spinner of run PID is left (within a second:
# the kernel delivers a parent-death signal after the parent is gone).
no_survivor() {
	local left i
	for i in $(seq 1 10); do
		left=$(spinners "$1" | tr '\n' ' ')
		[ -z "$left" ] && return 0
		sleep 0.1
		: "$i"
	done
	fail "spinner(s) $left of compare $1 survived $2"
}

# 1. SIGTERM in the middle: the run stops and takes its spinners along.
"$here/compare" --quick --busy 2 --no-plot --build "$build" --out "$work/term" \
	>"$work/term.log" 2>&1 &
cpid=$!
wait_spinners "$cpid" 2
kill -TERM "$cpid"
rc=0
wait_exit "$cpid" || rc=$?
if [ "$rc" != 130 ]; then
	tail -n 20 "$work/term.log" >&2
	fail "compare exited with $rc after SIGTERM, not 130 (its trap)"
fi
no_survivor "$cpid" "a SIGTERM"
cpid=
echo "compare_busy_check: SIGTERM mid-run: exit 130, no spinner left"

# 2. A whole --quick --busy 1 run.
# The default output directory: the results stay for a look, beside the
# quiet run's.
out=$build/perf-compare-quick-busy1
"$here/compare" --quick --busy 1 --build "$build" >"$work/run.log" 2>&1 &
cpid=$!
wait_spinners "$cpid" 1
sp=$(spinners "$cpid")
cls=$(ps -o cls= -p "$sp" | tr -d ' ')
[ "$cls" = TS ] || fail "spinner $sp runs in scheduling class $cls, not TS (time-sharing)"
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
	aff=$(taskset -pc "$sp" | sed 's/.*: *//')
	[ "$aff" = 1 ] || fail "spinner $sp may run on cpus $aff, not on core 1 only"
fi
rc=0
wait "$cpid" || rc=$?
no_survivor "$cpid" "its run"
p=$cpid
cpid=
if [ "$rc" != 0 ]; then
	cat "$work/run.log" >&2
	fail "compare --quick --busy 1 exited with $rc"
fi
t=$out/tables.txt
grep -q '^# busy: 1 spinning process (perf/spin, class TS, nice ' "$t" ||
	fail "tables.txt does not state the load: $(grep '^# busy' "$t" || echo 'no busy line')"
grep -q '^# busy: .*; each got [0-9.]* of a core$' "$t" ||
	fail "tables.txt does not give the spinner's share of its core"
head -n 1 "$out/raw.tsv" | grep -q '^# busy: 1 spinning process' ||
	fail "raw.tsv does not begin with the load"
grep -q '^== targets (issue 18) under load (--busy 1' "$t" || fail "tables.txt has no under-load targets"
for row in "tcp message rate at least 0.9 x UCX tcp's" "tcp 8 B latency at most 1/0.9 x UCX tcp's"; do
	grep -E -q "^  $row +(met|MISSED|n/a)" "$t" || fail "tables.txt has no row '$row'"
done
echo "compare_busy_check: --quick --busy 1 (compare $p): tables with the load stated, no spinner left"
