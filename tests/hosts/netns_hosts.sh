#!/bin/sh
# Two simulated hosts, h1 and h2, each a network namespace with its own
# interface and address and a UTS namespace with its own host name, joined
# by a bridge in a third namespace; a launcher started in h1 starts 2 ranks
# on each host through netns_agent.sh (its remote shell), and the examples
# run between them:
#
#   netns_hosts.sh LAUNCHER AGENT ALLREDUCE RPC_DEMO PMIX_BUILT
#
# LAUNCHER: mpirun (Open MPI, PMIx) or hydra (MPICH's mpiexec.hydra, PMI-1).
# allreduce -w runs once over tcp and once over sock between the hosts (sm
# within each), and must print pi and, for every partner of every rank, sm
# when both are on one host and the chosen transport otherwise; rpc_demo -W
# runs over tcp and over sock, rank 0 serving 3 clients (one on its host,
# two on the other).  A device that is not there (-x nosuch) must fail
# the allreduce with a message naming it.
#
# The hosts and their addresses: netns_lib.sh (h1 10.231.0.1, h2
# 10.231.0.2 on cci0).
#
# The host names need no entry in /etc/hosts: Open MPI's daemons and
# hydra's proxies connect back to the address of cci0 (oob_tcp_if_include,
# -iface) and the ranks learn hosts from their launcher.  Everything is
# removed on exit, also on failure or a signal.  Exit 77 (skipped), naming
# what is missing, when a command or the permission to make namespaces is.
set -u
launcher=$1 agent=$2 allreduce=$3 rpc_demo=$4 pmix_built=$5
export CCI_WIRE_TIMEOUT=30
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cci-hosts.XXXXXX") || exit 1
netns_hosts="h1 h2" netns_tmp=$tmp
# shellcheck source=tests/hosts/netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
p=$netns_prefix

cleanup() {
	netns_cleanup
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
	echo "netns_hosts.sh: $*" >&2
	exit 1
}

case $launcher in
mpirun)
	[ "$pmix_built" = yes ] ||
		netns_skip "libcci_wire was built without PMIx (libpmix-dev not found)"
	command -v mpirun.openmpi >/dev/null || netns_skip "no mpirun.openmpi (Debian: openmpi-bin)"
	;;
hydra)
	command -v mpiexec.hydra >/dev/null || netns_skip "no mpiexec.hydra (Debian: mpich)"
	;;
*)
	fail "unknown launcher $launcher"
	;;
esac
netns_setup

# Every device a rank may use: sm within a host; tcp and sock on cci0,
# the same name on every host.
cat >"$tmp/hosts.ini" <<EOF
[sm]
transport = sm
[tcp]
transport = tcp
interface = cci0
[sock]
transport = sock
interface = cci0
EOF
export CCI_CONFIG="$tmp/hosts.ini"

# The launcher's command line, started in h1 as the agent starts commands
# on the other hosts.
extra=
case $launcher in
mpirun)
	[ "$(id -u)" = 0 ] && extra=--allow-run-as-root
	# Sanitized builds: libpmix's own leftovers at exit.
	supp=$(cd "$(dirname "$0")/../wire" && pwd)/lsan.supp
	export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$supp"
	set -- mpirun.openmpi $extra --oversubscribe --host h1:2,h2:2 -np 4 \
		--mca plm_rsh_agent "$agent" --mca oob_tcp_if_include cci0 --mca btl self
	;;
hydra)
	set -- mpiexec.hydra -launcher ssh -launcher-exec "$agent" -hosts h1:2,h2:2 -n 4 \
		-iface cci0
	;;
esac

# run NAME PROGRAM ARGS...: the launcher runs it; its output in $tmp/NAME.
run() {
	name=$1
	shift
	echo "== $name: $*"
	timeout -k 5 40 ip netns exec "${p}h1" unshare --uts \
		sh -c 'hostname h1 && exec "$@"' sh "$@" >"$tmp/$name" 2>"$tmp/$name.err"
	rc=$?
	cat "$tmp/$name" "$tmp/$name.err"
	[ $rc -eq 0 ] || fail "$name: the launcher exited $rc"
}

# check_allreduce NAME TRANSPORT: pi from rank 0, and each partner reached
# by sm on the rank's own host and by TRANSPORT on the other.
check_allreduce() {
	grep -Eq '^(am|rma) +N=4 .* ok$' "$tmp/$1" || fail "$1: no result line from rank 0"
	awk -v want="$2" '
	/^allreduce\[[0-9]+\] on [^:]+: partner/ {
		rank = $1; sub(/^allreduce\[/, "", rank); sub(/\]$/, "", rank)
		host = $3; sub(/:$/, "", host)
		hosts[rank] = host
		peer_host = $7; via = $9
		expect = host == peer_host ? "sm" : want
		if (via != expect) {
			printf "rank %s on %s reaches its partner %s on %s by %s, not %s\n",
			       rank, host, $5, peer_host, via, expect
			bad = 1
		}
		lines++; kind[via]++
	}
	END {
		for (r in hosts) per[hosts[r]]++
		if (lines != 8) { printf "%d partner lines, not 8\n", lines; bad = 1 }
		if (per["h1"] != 2 || per["h2"] != 2) { print "not 2 ranks on each of h1 and h2"; bad = 1 }
		if (!kind["sm"] || !kind[want]) { print "sm or " want " never used"; bad = 1 }
		exit bad
	}' "$tmp/$1" >"$tmp/why" || fail "$1: $(cat "$tmp/why")"
}

# check_rpc NAME TRANSPORT: the server on TRANSPORT at h1's address, 3
# clients each with every call done.
check_rpc() {
	grep -Eq "^serving at $2://10\\.231\\.0\\.1:" "$tmp/$1" || fail "$1: not served over $2 at 10.231.0.1"
	[ "$(grep -Ec '^300 transform calls of 4096 bytes' "$tmp/$1")" -eq 3 ] ||
		fail "$1: not 3 clients' results"
	grep -Eq '^served 900 calls from 3 clients' "$tmp/$1" || fail "$1: the server did not serve 900 calls"
}

# The allreduce variants alternate between the launchers so that both
# variants cross both transports.
if [ "$launcher" = mpirun ]; then v_tcp=am v_sock=rma; else v_tcp=rma v_sock=am; fi
run allreduce-tcp "$@" "$allreduce" -w -V -v $v_tcp -x tcp -k 300 -t 30
check_allreduce allreduce-tcp tcp
run allreduce-sock "$@" "$allreduce" -w -V -v $v_sock -x sock -k 300 -t 30
check_allreduce allreduce-sock sock
# No such device for the other host: every rank must say so and fail.
echo "== allreduce-nodev: $* $allreduce -w -x nosuch"
timeout -k 5 40 ip netns exec "${p}h1" unshare --uts sh -c 'hostname h1 && exec "$@"' sh \
	"$@" "$allreduce" -w -v am -x nosuch -k 10 -t 30 >"$tmp/nodev" 2>&1
rc=$?
cat "$tmp/nodev"
[ $rc -ne 0 ] || fail "allreduce-nodev: passed without a device for the other host"
[ "$(grep -c 'no device or transport nosuch for ranks of other hosts' "$tmp/nodev")" -ge 1 ] ||
	fail "allreduce-nodev: no message naming the missing device"
for t in tcp sock; do
	run rpc-$t "$@" "$rpc_demo" -W -D $t -t 30 -b 300 -z 4096 -w 16
	check_rpc rpc-$t $t
done
echo "netns_hosts.sh: $launcher: all runs passed"
