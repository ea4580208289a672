#!/bin/sh
# A one-node Slurm cluster of its own, started and stopped here: munged,
# slurmctld and slurmd (as root) on loopback ports, everything in a scratch
# directory.  Under it, 4 ranks each (oversubscribed):
#
#   srun --mpi=pmi2 wire_rank_test    the whole libcci_wire contract: pmi2
#                                     chosen from Slurm's environment, then
#                                     pmi1 forced (Slurm's plugin serves both);
#                                     rank 2 exiting mid-fence, named by the
#                                     others
#   srun --mpi=pmix wire_rank_test    the same over PMIx (pmix), when both
#                                     Slurm's pmix plugin and libcci_wire's
#                                     PMIx backend are there
#   srun --mpi=pmi2 allreduce -w      the examples, URIs through the launcher
#   srun --mpi=pmix allreduce -w      (sm, active messages); rank 0 of
#   srun --mpi=pmi2 rpc_demo -W       rpc_demo serving the 3 others
#   srun --mpi=pmix rpc_demo -W
#
#   slurm.sh RANK_TEST ALLREDUCE RPC_DEMO PMIX_BUILT
#
# Exit 77 (skipped), naming what is missing, without Slurm or munge, or
# when not root (slurmd starts the ranks as their user).  Every daemon is
# stopped and the directory removed on exit, also on failure.
set -u
prog=$1 allreduce=$2 rpc_demo=$3 pmix_built=$4
n=4

skip() {
	echo "skipped: $*"
	exit 77
}
for c in slurmctld slurmd srun munged; do
	command -v "$c" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$c" >/dev/null 2>&1 ||
		skip "no $c (Debian: slurm-wlm and munge; scripts/setup.sh installs them)"
done
PATH=$PATH:/usr/sbin
[ "$(id -u)" = 0 ] || skip "not root: the test's slurmd runs as root"
command -v ss >/dev/null || skip "no ss (Debian: iproute2)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cci-slurm.XXXXXX")
pids=
# Running, not a zombie awaiting this shell's wait.
alive() {
	[ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^Z'
}
stop() {
	# The steps still running (a run that timed out), then the daemons, by
	# the pids this script started (munged by its pid file).
	if [ -n "$pids" ]; then
		scancel -p test >/dev/null 2>&1
		i=0
		while [ $i -lt 30 ] && [ -n "$(squeue -h -p test 2>/dev/null)" ]; do
			sleep 0.1
			i=$((i + 1))
		done
	fi
	for p in $pids; do
		kill "$p" 2>/dev/null
	done
	[ -f "$tmp/munged.pid" ] && kill "$(cat "$tmp/munged.pid")" 2>/dev/null
	i=0
	while [ $i -lt 50 ]; do
		alive=
		for p in $pids; do
			alive "$p" && alive=1
		done
		[ -z "$alive" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	for p in $pids; do
		kill -9 "$p" 2>/dev/null
	done
	wait
	rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 1' INT TERM HUP PIPE

fail() {
	echo "slurm.sh: $*" >&2
	for f in slurmctld.log slurmd.log munged.log; do
		[ -f "$tmp/$f" ] || continue
		echo "--- last lines of $f:" >&2
		tail -n 15 "$tmp/$f" >&2
	done
	exit 1
}

# Two free loopback ports: slurmctld's and slurmd's (a bounded search).
port_free() {
	! ss -Htln "sport = :$1" | grep -q .
}
ports=
p=$((20000 + $$ % 20000))
i=0
while [ $i -lt 200 ] && [ "$(echo $ports | wc -w)" -lt 2 ]; do
	port_free $p && ports="$ports $p"
	p=$((p + 1))
	i=$((i + 1))
done
set -- $ports
[ $# -eq 2 ] || fail "no two free TCP ports on loopback"
ctld_port=$1 slurmd_port=$2
host=$(hostname -s)

mkdir -p "$tmp/state" "$tmp/spool" "$tmp/run"
chmod 700 "$tmp"
# munge: a key of our own, its socket in the scratch directory.
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$tmp/munge.key"
munged --key-file="$tmp/munge.key" --socket="$tmp/munge.sock" --pid-file="$tmp/munged.pid" \
	--log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed" --force \
	>"$tmp/munged.out" 2>&1 || { cat "$tmp/munged.out" >&2; fail "munged did not start"; }

# CPUs=4 on whatever cores there are (config_overrides: slurmd takes the
# node as configured), no cgroups (linuxproc tracks the steps' processes).
cat >"$tmp/slurm.conf" <<EOF
ClusterName=cci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
SlurmdParameters=config_overrides
TmpFS=$tmp/run
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PluginDir=/usr/lib/x86_64-linux-gnu/slurm-wlm
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$n State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=10 State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"

slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -f "$SLURM_CONF" -N "$host" >"$tmp/slurmd.out" 2>&1 &
pids="$pids $!"

# The node idle (bounded: 30 s).
i=0
state=
while [ $i -lt 150 ]; do
	state=$(sinfo -h -n "$host" -o %t 2>/dev/null)
	[ "$state" = idle ] && break
	for p in $pids; do
		alive "$p" || { cat "$tmp"/*.out >&2; fail "a daemon exited at start"; }
	done
	sleep 0.2
	i=$((i + 1))
done
[ "$state" = idle ] || fail "node $host not idle after 30 s (state '$state')"

export CCI_WIRE_TIMEOUT=30
unset CCI_WIRE_BACKEND
# Sanitized builds: libpmix's own leftovers at exit (srun passes the
# environment on to the tasks).
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp"
plugins=$(srun --mpi=list 2>&1)
failed=0

# srun MPI BACKEND PROGRAM ARGS...: its output must hold "rank R of N: ok
# (BACKEND)" for every rank (wire_rank_test), one allreduce line ending
# "ok", or the results of rpc_demo's 3 clients.
run() {
	mpi=$1 backend=$2
	shift 2
	out=$tmp/out.$mpi.$backend.$(basename "$1")
	timeout -k 5 60 srun -p test -N 1 -n $n --mpi="$mpi" -t 2 "$@" >"$out" 2>&1
	rc=$?
	cat "$out"
	if [ $rc -ne 0 ]; then
		echo "slurm.sh: srun --mpi=$mpi $* exited $rc" >&2
		failed=1
		return
	fi
	case $1 in
	*wire_rank_test)
		for r in $(seq 0 $((n - 1))); do
			grep -qx "rank $r of $n: ok ($backend)" "$out" ||
				{ echo "slurm.sh: --mpi=$mpi: rank $r did not pass ($backend)" >&2; failed=1; }
		done
		;;
	*rpc_demo)
		[ "$(grep -Ec '^200 transform calls of 4096 bytes' "$out")" -eq $((n - 1)) ] ||
			{ echo "slurm.sh: --mpi=$mpi: rpc_demo: not $((n - 1)) clients' results" >&2; failed=1; }
		;;
	*)
		[ "$(grep -Ec "^am +N=$n .* ok$" "$out")" -eq 1 ] ||
			{ echo "slurm.sh: --mpi=$mpi: allreduce printed no 'am N=$n ... ok'" >&2; failed=1; }
		;;
	esac
}

# Rank 2 exits while the others fence: srun --mpi=pmi2 leaves them running
# (no --kill-on-bad-exit), and each must name rank 2 (its verdict in a file).
kill_run() {
	mpi=$1
	mkdir -p "$tmp/kill.$mpi"
	timeout -k 5 60 srun -p test -N 1 -n $n --mpi="$mpi" -t 2 "$prog" -n $n -k 2 -e \
		-o "$tmp/kill.$mpi" >"$tmp/out.kill.$mpi" 2>&1
	cat "$tmp/out.kill.$mpi"
	for r in 0 1 3; do
		grep -q "^rank $r of $n: rank 2 reported dead: .*rank 2 (pid" "$tmp/kill.$mpi/rank.$r" \
			2>/dev/null || { echo "slurm.sh: --mpi=$mpi: rank $r did not report rank 2 dead" >&2; failed=1; }
	done
}
run pmi2 pmi2 "$prog" -n $n -b pmi2
CCI_WIRE_BACKEND=pmi1 run pmi2 pmi1 "$prog" -n $n -b pmi1
CCI_CTP=sm run pmi2 pmi2 "$allreduce" -w -v am -k 500 -t 60
CCI_CTP=sm run pmi2 pmi2 "$rpc_demo" -W -t 60 -b 200 -z 4096 -w 16
kill_run pmi2
if ! echo "$plugins" | grep -qw pmix; then
	echo "srun --mpi=pmix: not run: Slurm has no pmix plugin (srun --mpi=list: $plugins)"
elif [ "$pmix_built" != yes ]; then
	echo "srun --mpi=pmix: not run: libcci_wire was built without PMIx (libpmix-dev not found)"
else
	run pmix pmix "$prog" -n $n -b pmix
	CCI_CTP=sm run pmix pmix "$allreduce" -w -v am -k 500 -t 60
	CCI_CTP=sm run pmix pmix "$rpc_demo" -W -t 60 -b 200 -z 4096 -w 16
	# No kill run: Slurm's pmix plugin cancels the step when a task dies,
	# racing the survivors' verdicts.
fi
[ $failed -eq 0 ] || fail "a run under srun failed"
exit 0
