#!/bin/bash
# Test: msgrate --threads 2 on 2 connections of one endpoint delivers
# exactly the messages it says it sent, and refuses fewer connections than
# threads.
#
#   perf/msgrate_threads_test.sh MSGRATE_BINARY TRANSPORT
#
# TRANSPORT is a CCI_CTP value (sm, tcp).  Checks the behaviour, never the
# speed: the client exits 0 with one JSON row saying 2 threads, 2
# connections and the count; the server, which counts every data message
# it receives on its own, reports exactly the warm-up plus the timed count
# (a lost completion would stall the client into its -t timeout, a
# duplicated or extra send would show in the server's count).  Every wait
# is bounded.  Exit status 0: passed, 1: failed (the reason on stderr).
set -u

if [ $# -ne 2 ]; then
	echo "usage: $0 MSGRATE_BINARY TRANSPORT" >&2
	exit 2
fi
mr=$1 ctp=$2
count=20011 warm=1009 # odd, so the two threads' shares differ
export CCI_CTP=$ctp

# shellcheck source=perf/server_trap.sh
. "$(dirname "$0")/server_trap.sh" msgrate-threads

fail() {
	echo "$0 ($ctp): FAILED: $*" >&2
	for f in client.out client.err server.out; do
		[ -s "$tmp/$f" ] && { echo "--- $f" >&2; cat "$tmp/$f" >&2; }
	done
	exit 1
}

# More threads than connections: a clear refusal, before any connection.
if timeout 10 "$mr" -h "$ctp://nowhere" -n 1 --threads 2 >"$tmp/client.out" 2>"$tmp/client.err"; then
	fail "--threads 2 with -n 1 was accepted"
fi
grep -q -- "--threads 2 needs at least 2 connections" "$tmp/client.err" ||
	fail "--threads 2 with -n 1: no message naming the option"

timeout 60 "$mr" -s -o "$tmp/uri" -t 20 --json >"$tmp/server.out" 2>&1 &
server_pid=$!
i=0
while [ ! -s "$tmp/uri" ]; do
	kill -0 "$server_pid" 2>/dev/null || fail "the server exited before publishing its URI"
	[ $i -ge 100 ] && fail "the server did not publish its URI in 10 s"
	sleep 0.1
	i=$((i + 1))
done

timeout 60 "$mr" -h "$(cat "$tmp/uri")" -n 2 --fixed --threads 2 -i "$count" --warmup "$warm" \
	-t 20 --json >"$tmp/client.out" 2>"$tmp/client.err" || fail "the client exited with $?"
rc=0
wait "$server_pid" || rc=$?
server_pid=
[ "$rc" -eq 0 ] || fail "the server exited with $rc"

rows=$(grep -c '"benchmark":"msgrate"' "$tmp/client.out")
[ "$rows" -eq 1 ] || fail "$rows client rows, expected 1"
for f in '"conns":2,' '"threads":2,' "\"count\":$count," "\"transport\":\"$ctp\""; do
	grep -q "$f" "$tmp/client.out" || fail "client row lacks $f"
done
grep -q "\"role\":\"server\",\"received\":$((count + warm))}" "$tmp/server.out" ||
	fail "the server did not count exactly $((count + warm)) messages"
echo "$0 ($ctp): 2 threads on 2 connections, $((count + warm)) messages counted by the server"
