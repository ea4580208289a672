#!/bin/sh
# The demo end to end: a server that stops after two clients, a call of
# "upper" whose answer is checked, and a short checked benchmark with
# RMA-sized arguments.  Bounded: every step has a timeout.
set -eu
demo=$1
dir=$(mktemp -d /tmp/rpc-demo-XXXXXX)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$dir"' EXIT
timeout 50 "$demo" -s -o "$dir/uri" -x 2 -t 45 > "$dir/server.out" &
server=$!
out=$(timeout 20 "$demo" -f "$dir/uri" upper "hello, rpc")
echo "upper: $out"
timeout 20 "$demo" -f "$dir/uri" -b 2000 -z 4096 -w 16
wait "$server"
cat "$dir/server.out"
if [ "$out" = "HELLO, RPC" ]; then
	echo "1 passed, 0 failed"
else
	echo "0 passed, 1 failed"
	exit 1
fi
