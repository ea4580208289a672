#!/bin/sh
# allreduce -w: 4 ranks started by a launcher, their URIs exchanged through
# libcci_wire; rank 0's line must say ok and every rank must exit 0.
#
#   run_launched.sh LAUNCHER_DIR BACKEND ALLREDUCE CCI_WIRE_LAUNCH PMIX_BUILT VARIANT
#
# LAUNCHER_DIR holds tests/wire/launcher.sh (BACKEND: local, pmi1, pmix);
# VARIANT am or rma.  Exit 77 (skipped) when the launcher is missing.
set -u
launcher_dir=$1 backend=$2 prog=$3 launch=$4 pmix_built=$5 variant=$6
n=4
export CCI_WIRE_TIMEOUT=30
out=$(mktemp "${TMPDIR:-/tmp}/cci-allreduce.XXXXXX")
trap 'rm -f "$out"' EXIT
trap 'exit 1' INT TERM

# shellcheck source=tests/wire/launcher.sh
launcher_backend=$backend launcher_n=$n launcher_local=$launch launcher_pmix_built=$pmix_built
. "$launcher_dir/launcher.sh"
timeout -k 5 100 "$@" "$prog" -w -v "$variant" -k 500 -t 60 >"$out"
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "run_launched.sh: $1 exited $rc" >&2; exit 1; }
grep -Eq "^$variant +N=$n .* ok\$" "$out" || { echo "run_launched.sh: no result line of rank 0" >&2; exit 1; }
