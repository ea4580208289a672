#!/bin/sh
# Build the libFuzzer harnesses from source and run each for a fixed time,
# as many at once as there are cores.
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
clang $cflags -I"$top/api" -I"$top/plugins/tcp" \
	"$top/tests/tcp/tcp_wire_fuzz.c" "$top/plugins/tcp/tcp_wire.c" \
	"$top/plugins/common/emu_rma_wire.c" "$top/plugins/common/hello.c" -o "$work/wire_fuzz"
clang $cflags -I"$top/plugins/sm" \
	"$here/sm_ring_fuzz.c" "$top/plugins/sm/sm_ring.c" -o "$work/sm_ring_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/verbs" \
	"$here/verbs_wire_fuzz.c" "$top/plugins/verbs/verbs_wire.c" \
	"$top/plugins/common/peer_reg_wire.c" "$top/plugins/common/hello.c" -o "$work/verbs_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/sock" \
	"$here/sock_dgram_fuzz.c" "$top/plugins/sock/sock_dgram.c" "$top/plugins/common/hello.c" \
	-o "$work/dgram_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/sm" -I"$top/plugins/common" \
	"$here/sm_ctl_fuzz.c" "$top/plugins/sm/sm_ctl_wire.c" "$top/plugins/common/hello.c" \
	-o "$work/sm_ctl_fuzz"
clang $cflags -I"$top/api" -I"$top/plugins/ofi" \
	"$here/ofi_wire_fuzz.c" "$top/plugins/ofi/ofi_wire.c" \
	"$top/plugins/common/peer_reg_wire.c" "$top/plugins/common/hello.c" -o "$work/ofi_fuzz"

# Each harness starts from its committed corpus (tests/fuzz/corpus/<name>),
# copied so that what the fuzzer adds stays in the work directory.
for h in ini uri wire sm_ring verbs dgram sm_ctl ofi; do
	mkdir -p "$work/${h}_corpus"
	cp "$here/corpus/$h/"* "$work/${h}_corpus/" 2>/dev/null || true
done
cp "$top/config/cci.ini.example" "$work/ini_corpus/"

# One harness per core at a time (each is single-threaded); a harness
# that fails shows the tail of its log and leaves its reproducer behind.
fuzz_one() {
	if (cd "$work" && "./$1_fuzz" -max_total_time="$secs" -max_len=8192 \
		-print_final_stats=1 "$1_corpus" > "$1.log" 2>&1); then
		echo "fuzz: $1 for ${secs}s: $(grep -E '^stat::number_of_executed_units' "$work/$1.log" || true)"
	else
		tail -n 40 "$work/$1.log"
		echo "fuzz: $1 FAILED; reproducer and log in $work"
		return 1
	fi
}

jobs=$(nproc 2>/dev/null || echo 1)
status=0
running=""
for h in ini uri wire sm_ring verbs dgram sm_ctl ofi; do
	fuzz_one "$h" &
	running="$running $!"
	if [ "$(echo $running | wc -w)" -ge "$jobs" ]; then
		for pid in $running; do wait "$pid" || status=1; done
		running=""
	fi
done
for pid in $running; do wait "$pid" || status=1; done
[ "$status" -ne 0 ] || rm -rf "$work"
exit "$status"
