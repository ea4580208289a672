# shellcheck shell=bash
# perf/server_trap.sh NAME - sourced by the perf scripts that run a
# server in the background: makes a temporary directory $tmp (named after
# NAME) and sets the traps that, on any exit, kill the server whose pid
# the script put in $server_pid (if any) and remove $tmp.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
server_pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null
		wait "$server_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
