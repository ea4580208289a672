#!/bin/bash
# Runs one pingpong measurement: a server in the background, then the client.
#
#   perf/run_pingpong.sh BUILD_DIR [client options...]
#
# The server writes its URI to a file (atomically) and the client is started
# with -h that URI and the given options.  The client's output is this
# script's stdout; the server's output goes to stderr.  A client option -b
# (blocking) and -D DEVICE are passed to the server too; PINGPONG_SERVER_ARGS adds more
# server options (e.g. "-D mydevice").  PINGPONG_WRAPPER, if set, prefixes
# both commands (e.g. "env LD_PRELOAD=...").  Exit status: non-zero if
# either side fails or the server does not publish its URI within 10 s.
# bash, not sh: bash reaps a finished background job at once, so "kill -0"
# tells a dead server from a live one (dash would see a zombie).
set -u

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [client options...]" >&2
	exit 2
fi
build=$1
shift
pp="$build/perf/pingpong"
if [ ! -x "$pp" ]; then
	echo "$0: $pp not found (build first: ninja -C $build)" >&2
	exit 2
fi

# shellcheck source=perf/server_trap.sh
. "$(dirname "$0")/server_trap.sh" pingpong

# The server mirrors the client's -b (blocking) and -D DEVICE (transport).
server_args=${PINGPONG_SERVER_ARGS:-}
prev=
for a in "$@"; do
	[ "$a" = "-b" ] && server_args="$server_args -b"
	[ "$prev" = "-D" ] && server_args="$server_args -D $a"
	prev=$a
done

# shellcheck disable=SC2086 # word splitting of the option strings is wanted
${PINGPONG_WRAPPER:-} "$pp" -s -o "$tmp/uri" $server_args >&2 &
server_pid=$!

# Bounded wait for the URI: 100 x 0.1 s.
i=0
while [ ! -s "$tmp/uri" ]; do
	if ! kill -0 "$server_pid" 2>/dev/null || [ $i -ge 100 ]; then
		echo "$0: the server did not publish its URI" >&2
		exit 1
	fi
	sleep 0.1
	i=$((i + 1))
done

# shellcheck disable=SC2086
${PINGPONG_WRAPPER:-} "$pp" -h "$(cat "$tmp/uri")" "$@"
client_rc=$?
if [ $client_rc -ne 0 ]; then
	echo "$0: client failed ($client_rc)" >&2
	exit $client_rc
fi

# The server exits once the client said it is done; give it 10 s.
i=0
while kill -0 "$server_pid" 2>/dev/null && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
if kill -0 "$server_pid" 2>/dev/null; then
	echo "$0: the server did not exit" >&2
	exit 1
fi
wait "$server_pid"
server_rc=$?
server_pid=
if [ $server_rc -ne 0 ]; then
	echo "$0: server failed ($server_rc)" >&2
	exit $server_rc
fi
exit 0
