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
clang $cflags -I"$top/plugins/sm" \
	"$here/sm_ring_fuzz.c" "$top/plugins/sm/sm_ring.c" -o "$work/sm_ring_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/verbs" \
	"$here/verbs_wire_fuzz.c" "$top/plugins/verbs/verbs_wire.c" -o "$work/verbs_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/sockets" \
	"$here/sock_dgram_fuzz.c" "$top/plugins/sockets/sock_dgram.c" \
	"$top/plugins/sockets/sock_wire.c" -o "$work/dgram_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/sm" \
	"$here/sm_ctl_fuzz.c" "$top/plugins/sm/sm_ctl_wire.c" -o "$work/sm_ctl_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/ofi" \
	"$here/ofi_wire_fuzz.c" "$top/plugins/ofi/ofi_wire.c" -o "$work/ofi_fuzz"

# Each harness starts from its committed corpus (tests/fuzz/corpus/<name>),
# copied so that what the fuzzer adds stays in the work directory.
for h in ini uri wire sm_ring verbs dgram sm_ctl ofi; do
	mkdir -p "$work/${h}_corpus"
	cp "$here/corpus/$h/"* "$work/${h}_corpus/" 2>/dev/null || true
done
cp "$top/config/cci.ini.example" "$work/ini_corpus/"

status=0
for h in ini uri wire sm_ring verbs dgram sm_ctl ofi; do
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
