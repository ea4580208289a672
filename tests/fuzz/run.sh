#!/bin/sh
# Build the libFuzzer harnesses from source and run each for a fixed time.
#
# Usage: tests/fuzz/run.sh [seconds]      (default 20 seconds per harness)
#
# Needs clang with libFuzzer.  Exits non-zero when a harness crashes (the
# reproducer is left in the work directory, whose path is printed).
set -eu

secs=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cci-fuzz.XXXXXX")
cflags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=gnu11 -D_GNU_SOURCE"
echo "fuzz: building in $work"

clang $cflags -I"$top/api" -I"$top/config" \
	"$here/ini_fuzz.c" "$top/config/ini.c" -o "$work/ini_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/common" \
	"$here/uri_fuzz.c" "$top/plugins/common/uri.c" -o "$work/uri_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/sockets" \
	"$top/tests/sockets/sock_wire_fuzz.c" "$top/plugins/sockets/sock_wire.c" -o "$work/wire_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/verbs" \
	"$here/verbs_wire_fuzz.c" "$top/plugins/verbs/verbs_wire.c" -o "$work/verbs_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/sockets" \
	"$here/sock_dgram_fuzz.c" "$top/plugins/sockets/sock_dgram.c" \
	"$top/plugins/sockets/sock_wire.c" -o "$work/dgram_fuzz"

# Seed each corpus with real inputs so the fuzzer starts from valid syntax.
mkdir -p "$work/ini_corpus" "$work/uri_corpus" "$work/wire_corpus" "$work/verbs_corpus" \
	"$work/dgram_corpus"
cp "$top/config/cci.ini.example" "$work/ini_corpus/"
printf '[a]\r\nk = v # c\r\n[b]\nx=\n' > "$work/ini_corpus/crlf"
i=0
for u in 'tcp://127.0.0.1:5000' 'sock://[::1]:1' 'verbs://[fe80::1%ib0]:65535' \
	 'sm:///tmp/cci-sm-1000/42/0' 'ofi://tcp/addr' 'host.example.org:80'; do
	printf '%s' "$u" > "$work/uri_corpus/seed$i"
	i=$((i + 1))
done

# A verbs header of each length class and a hello (magic "VICC", version 1).
printf '\001\001\000\000\000\000\000\000\004\000\000\000\000\000\000\000abcd' \
	> "$work/verbs_corpus/msg"
printf 'VICC\001\001\000\000\000\040\000\000\010\000\000\000\000\000\000\000\000\000\000\000\001\002\003\004\005\006\007\010' \
	> "$work/verbs_corpus/hello"

# Datagrams of every type, as the sock transport sends them.
python3 - "$work/dgram_corpus" <<'PY'
import struct, sys
def hdr(t, flags=1, seq=7, token=0x1122334455667788):
    return struct.pack('<BBBBIQIIQ', 0xd7, t, flags, 1, seq, token, 3, 64, 5)
subs = {9: struct.pack('<II', 5, 0), 10: struct.pack('<IIQQ', 1, 0, 9, 0),
        11: struct.pack('<II', 1, 0), 12: struct.pack('<II', 1, 0),
        13: struct.pack('<IIQQQ', 1, 0, 9, 0, 16), 14: struct.pack('<IIQ', 1, 0, 0),
        15: struct.pack('<II', 1, 0)}
hello = struct.pack('<IIIIIIQQ', 0x55494343, 0, 65536, 256, 3, 65507, 1, 2) + b'abc'
accept = struct.pack('<IIQQQII', 65536, 256, 1, 2, 3, 65507, 0)
seeds = {1: hello, 2: accept, 3: b'', 4: b'', 5: b'', 6: b'', 7: b'', 8: b'hello'}
for t, sub in subs.items():
    seeds[t] = sub + (b'hello' if t in (9, 10, 14) else b'')
for t, body in seeds.items():
    with open('%s/seed%d' % (sys.argv[1], t), 'wb') as f:
        f.write(hdr(t, token=0 if t == 1 else 0x1122334455667788) + body)
PY

status=0
for h in ini uri wire verbs dgram; do
	echo "fuzz: $h for ${secs}s"
	if ! (cd "$work" && "./${h}_fuzz" -max_total_time="$secs" -max_len=8192 \
		-print_final_stats=1 "${h}_corpus" > "$h.log" 2>&1); then
		tail -n 40 "$work/$h.log"
		echo "fuzz: $h FAILED; reproducer and log in $work"
		status=1
	else
		grep -E '^(Done|stat::number_of_executed_units)' "$work/$h.log" || true
	fi
done
[ "$status" -ne 0 ] || rm -rf "$work"
exit "$status"
