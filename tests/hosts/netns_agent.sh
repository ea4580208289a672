#!/bin/sh
# The remote shell of the namespace hosts (netns_hosts.sh): called like ssh
# by a launcher (Open MPI's plm_rsh_agent, MPICH hydra's -launcher-exec),
#
#   netns_agent.sh [OPTIONS] HOST COMMAND...
#
# it runs COMMAND (the words joined, as ssh does) in HOST's network
# namespace, ${HOSTS_NS_PREFIX}HOST, in a UTS namespace of its own whose
# host name is HOST.  Unlike ssh it passes the environment on (CCI_CONFIG
# reaches the ranks).  Options (hydra passes -x) are ignored.
set -u
while [ $# -gt 0 ]; do
	case $1 in
	-*) shift ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || { echo "netns_agent.sh: usage: [OPTIONS] HOST COMMAND..." >&2; exit 255; }
host=$1
shift
case $host in
*[!A-Za-z0-9-]*) echo "netns_agent.sh: bad host name '$host'" >&2; exit 255 ;;
esac
# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
exec ip netns exec "${HOSTS_NS_PREFIX:?}$host" \
	unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
