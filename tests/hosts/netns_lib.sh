# shellcheck shell=sh
# shellcheck disable=SC2154 # netns_hosts and netns_tmp are the caller's
# Sourced: simulated hosts, each a network namespace with its own interface
# and address, joined by a bridge in a hub namespace:
#
#   <p>hub:  bridge br0, ports v1, v2, ...
#   <p>hK:   cci0 (veth peer of vK) 10.231.0.K/24, lo
#
# Addresses exist only inside these namespaces, never in the namespace of
# the caller.  Processes started in hK through netns_agent.sh (a launcher's
# remote shell) or netns_in get host name hK from a UTS namespace of their
# own.  Set before sourcing (a sourced file takes no arguments in every sh):
#
#   netns_hosts   the host names, "h1 h2" (at most 250)
#   netns_tmp     a scratch directory of the caller's
#
# Then: netns_setup makes them (exit 77, naming what is not permitted or
# missing); netns_cleanup, called by the caller's EXIT trap, kills what is
# left in them and removes them, also after a failure; netns_in HOST
# COMMAND... runs a command there.  HOSTS_NS_PREFIX (exported) is what
# netns_agent.sh needs.
netns_prefix=ccih$$x                  # unique to this run
HOSTS_NS_PREFIX=$netns_prefix
export HOSTS_NS_PREFIX
netns_created=
netns_had_run=no
mountpoint -q /run/netns 2>/dev/null && netns_had_run=yes

netns_cleanup() {
	for ns in $netns_created; do
		# processes a failed run left behind in our namespaces
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
	# ip netns mounted /run/netns for our namespaces: leave it as found,
	# unless others made namespaces meanwhile
	if [ $netns_had_run = no ] && [ -n "$netns_created" ] && [ -z "$(ip netns list 2>/dev/null)" ]; then
		umount /run/netns 2>/dev/null && rmdir /run/netns 2>/dev/null
	fi
	netns_created=
}

netns_skip() {
	echo "skipped: $*"
	exit 77
}

# Run a setup command; a failure is fatal and names the command.
netns_must() {
	"$@" 2>"$netns_tmp/netns.err" || {
		echo "netns_lib.sh: \`$*\` failed: $(cat "$netns_tmp/netns.err")" >&2
		exit 1
	}
}

netns_setup() {
	command -v ip >/dev/null || netns_skip "no ip command (Debian: iproute2)"
	command -v unshare >/dev/null || netns_skip "no unshare command (Debian: util-linux)"
	ip netns add "${netns_prefix}hub" 2>"$netns_tmp/netns.err" ||
		netns_skip "making a network namespace is not permitted (ip netns add: $(cat "$netns_tmp/netns.err"))"
	netns_created="${netns_prefix}hub"
	ip netns exec "${netns_prefix}hub" unshare --uts true 2>"$netns_tmp/netns.err" ||
		netns_skip "making a UTS namespace is not permitted (unshare --uts: $(cat "$netns_tmp/netns.err"))"
	ip -n "${netns_prefix}hub" link add br0 type bridge 2>"$netns_tmp/netns.err" ||
		netns_skip "no bridge links (ip link add type bridge: $(cat "$netns_tmp/netns.err"))"
	netns_must ip -n "${netns_prefix}hub" link set br0 up
	k=0
	for h in $netns_hosts; do
		k=$((k + 1))
		netns_must ip netns add "$netns_prefix$h"
		netns_created="$netns_created $netns_prefix$h"
		ip -n "${netns_prefix}hub" link add "v$k" type veth peer name cci0 netns "$netns_prefix$h" \
			2>"$netns_tmp/netns.err" ||
			netns_skip "no veth links (ip link add type veth: $(cat "$netns_tmp/netns.err"))"
		netns_must ip -n "${netns_prefix}hub" link set "v$k" master br0 up
		netns_must ip -n "$netns_prefix$h" addr add "10.231.0.$k/24" dev cci0
		netns_must ip -n "$netns_prefix$h" link set cci0 up
		netns_must ip -n "$netns_prefix$h" link set lo up
	done
}

# netns_in HOST COMMAND...: COMMAND in HOST's namespaces, host name HOST.
netns_in() {
	netns_host=$1
	shift
	# shellcheck disable=SC2016 # $0 is the inner shell's
	ip netns exec "$netns_prefix$netns_host" unshare --uts \
		sh -c 'hostname "$0" && exec "$@"' "$netns_host" "$@"
}
