#!/bin/sh
# An example started as 4 ranks (LAUNCHED_RANKS) by a launcher, its URIs exchanged through
# libcci_wire: every rank must exit 0 and the output must hold COUNT lines
# matching PATTERN (grep -E).
#
#   run_launched.sh LAUNCHER_DIR BACKEND CCI_WIRE_LAUNCH PMIX_BUILT PATTERN COUNT PROGRAM [ARGS...]
#
# LAUNCHER_DIR holds tests/wire/launcher.sh (BACKEND: local, pmi1, pmix).
# Exit 77 (skipped) when the launcher is missing.
set -u
launcher_dir=$1 launcher_backend=$2 launcher_local=$3 launcher_pmix_built=$4 pattern=$5 count=$6
shift 6
launcher_n=${LAUNCHED_RANKS:-4}
export CCI_WIRE_TIMEOUT=30
out=$(mktemp "${TMPDIR:-/tmp}/cci-launched.XXXXXX")
trap 'rm -f "$out"' EXIT
trap 'exit 1' INT TERM

# shellcheck source=tests/wire/launcher.sh
. "$launcher_dir/launcher.sh"
timeout -k 5 100 "$@" >"$out"
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "run_launched.sh: $1 exited $rc" >&2; exit 1; }
got=$(grep -Ec "$pattern" "$out")
[ "$got" -eq "$count" ] || { echo "run_launched.sh: $got lines match '$pattern', not $count" >&2; exit 1; }
