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

# Seed each corpus with real inputs so the fuzzer starts from valid syntax.
mkdir -p "$work/ini_corpus" "$work/uri_corpus" "$work/wire_corpus" "$work/verbs_corpus"
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

status=0
for h in ini uri wire verbs; do
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
