#!/bin/sh
# compare_tcp.sh BUILD_DIR [REPS] - the tcp transport beside bare TCP on this
# host, in one run: small-message one-way latency (pingpong vs
# baseline_tcp_pingpong, 1..64 bytes) and 1 MiB streaming (tcp_stream_bench
# vs the baseline's stream).  The two sides of each figure alternate REPS
# times (default 5) so that machine noise hits both; the median is printed
# with the ratio.  Not a test: nothing here judges the numbers.
set -eu

build=${1:?usage: $0 BUILD_DIR [REPS]}
reps=${2:-5}
src=$(cd "$(dirname "$0")/../.." && pwd)
base=$build/tests/sockets/baseline_tcp_pingpong
stream=$build/tests/sockets/tcp_stream_bench
tmp=$(mktemp -d "${TMPDIR:-/tmp}/compare_tcp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

i=0
while [ "$i" -lt "$reps" ]; do
	# mean of the 1..64-byte rows of each program
	"$base" -i 10000 -r 1 -n 2000 > "$tmp/b"
	sed -n '3,7p' "$tmp/b" | awk '{s += $2} END {print s / NR}' >> "$tmp/base_lat"
	tail -1 "$tmp/b" | awk '{print $(NF - 1)}' >> "$tmp/base_bw"
	CCI_CTP=tcp "$src/perf/run_pingpong.sh" "$build" -i 10000 2>/dev/null |
		awk '$1 ~ /^(1|2|4|8|16|32|64)$/ {s += $2; n++} END {print s / n}' >> "$tmp/cci_lat"
	"$stream" -n 2000 | awk '{print $(NF - 1)}' >> "$tmp/cci_msg"
	"$stream" -n 2000 -z | awk '{print $(NF - 1)}' >> "$tmp/cci_msgz"
	"$stream" -n 2000 -r | awk '{print $(NF - 1)}' >> "$tmp/cci_rma"
	i=$((i + 1))
done

bl=$(median < "$tmp/base_lat")
cl=$(median < "$tmp/cci_lat")
bb=$(median < "$tmp/base_bw")
cm=$(median < "$tmp/cci_msg")
cz=$(median < "$tmp/cci_msgz")
cr=$(median < "$tmp/cci_rma")
echo "tcp over loopback, median of $reps alternating runs"
printf '%-44s %10s %10s %8s\n' "" "bare TCP" "cci tcp" "ratio"
printf '%-44s %10.2f %10.2f %8.2f\n' "one-way latency, 1..64 B (us)" "$bl" "$cl" \
	"$(echo "$cl $bl" | awk '{print $1 / $2}')"
printf '%-44s %10.0f %10.0f %8.2f\n' "1 MiB messages streamed (MB/s)" "$bb" "$cm" \
	"$(echo "$cm $bb" | awk '{print $1 / $2}')"
printf '%-44s %10.0f %10.0f %8.2f\n' "1 MiB NO_COPY messages streamed (MB/s)" "$bb" "$cz" \
	"$(echo "$cz $bb" | awk '{print $1 / $2}')"
printf '%-44s %10.0f %10.0f %8.2f\n' "1 MiB RMA writes streamed (MB/s)" "$bb" "$cr" \
	"$(echo "$cr $bb" | awk '{print $1 / $2}')"
