#!/bin/sh
# One libcci_wire test: 4 ranks of wire_rank_test under a launcher, on
# however few cores (oversubscribed), every rank's result checked.
#
#   run_wire.sh BACKEND MODE RANK_TEST CCI_WIRE_LAUNCH PMIX_BUILT
#
# BACKEND local (cci_wire_launch), pmi1 or pmi2 (MPICH's mpiexec.hydra), pmix
# (Open MPI's mpirun), or none (no launcher: init must fail naming every
# variable it looked for; MODE is then ignored); MODE contract (the whole API on every rank) or kill
# (rank 2 dies while the others fence: each must name it) or stall (rank 2
# comes to the fence after the others' timeout: each must name it; local
# only, the backend that knows who is missing).  Launchers on
# loopback only.  Exit 77 (skipped) when the launcher is missing, naming it.
set -u
backend=$1 mode=$2 prog=$3 launch=$4 pmix_built=$5
n=4 victim=2
# Every collective call of the ranks gives up in 30 s; each launcher is
# bounded by timeout(1) on top.
export CCI_WIRE_TIMEOUT=30
unset CCI_WIRE_BACKEND

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cci-wire-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/out"

if [ "$backend" = none ]; then
	env -u PMIX_RANK -u PMIX_NAMESPACE -u PMI_FD -u PMI_RANK -u PMI_SIZE -u CCI_WIRE_DIR \
		-u CCI_WIRE_RANK -u CCI_WIRE_SIZE "$prog" -n 1 2>"$tmp/stderr"
	rc=$?
	cat "$tmp/stderr"
	[ $rc -ne 0 ] || { echo "init without a launcher succeeded" >&2; exit 1; }
	for v in CCI_WIRE_ENOLAUNCHER PMIX_RANK PMIX_NAMESPACE PMI_FD PMI_RANK PMI_SIZE CCI_WIRE_DIR \
		CCI_WIRE_RANK CCI_WIRE_SIZE; do
		grep -q "$v" "$tmp/stderr" || { echo "the message names no $v" >&2; exit 1; }
	done
	exit 0
fi
args="-n $n -b $backend"
[ "$mode" = kill ] && args="-n $n -k $victim -o $tmp/out"
[ "$mode" = stall ] && args="-n $n -s $victim" && export CCI_WIRE_TIMEOUT=2
# shellcheck source=tests/wire/launcher.sh
launcher_dir=$(dirname "$0") launcher_backend=$backend launcher_n=$n launcher_local=$launch
launcher_pmix_built=$pmix_built launcher_mode=$mode
# The victim exits rather than dies by a signal under hydra (see launcher.sh).
case $backend in pmi1 | pmi2) [ "$mode" = kill ] && args="$args -e" ;; esac
# shellcheck disable=SC2086 # args is words
set -- "$prog" $args
. "$launcher_dir/launcher.sh"

timeout -k 5 80 "$@" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
cat "$tmp/stdout"

fail() {
	echo "run_wire.sh: $backend $mode: $*" >&2
	echo "--- launcher exit status $rc; its stderr:" >&2
	cat "$tmp/stderr" >&2
	exit 1
}

if [ "$mode" = contract ]; then
	[ $rc -eq 0 ] || fail "$1 exited $rc"
	for r in $(seq 0 $((n - 1))); do
		grep -qx "rank $r of $n: ok ($backend)" "$tmp/stdout" || fail "rank $r did not pass"
	done
	exit 0
fi
if [ "$mode" = stall ]; then
	[ $rc -eq 0 ] || fail "$1 exited $rc"
	for r in $(seq 0 $((n - 1))); do
		[ $r -eq $victim ] && continue
		grep -q "^rank $r of $n: rank $victim reported late: .*rank $victim never joined" \
			"$tmp/stdout" || fail "rank $r did not report rank $victim late"
	done
	exit 0
fi

# kill: every survivor writes its verdict to a file; a launcher may return
# before them (bounded wait: 10 s).
i=0
while [ "$(ls "$tmp/out" | wc -l)" -lt $((n - 1)) ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
for r in $(seq 0 $((n - 1))); do
	[ $r -eq $victim ] && continue
	grep -q "^rank $r of $n: rank $victim reported dead: .*rank $victim (pid" "$tmp/out/rank.$r" 2>/dev/null ||
		fail "rank $r did not report rank $victim dead"
done
[ -e "$tmp/out/rank.$victim" ] && fail "rank $victim survived"
exit 0
