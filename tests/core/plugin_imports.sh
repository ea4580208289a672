#!/bin/sh
# No plugin module imports a cci_* symbol: plugins reach the core through
# the services table only.  An imported cci_* name resolves only when
# libcci's symbols are global, so under dlopen(RTLD_LOCAL), which FFIs
# use, such a plugin would fail to load and its transport vanish.
set -u
pass=0
fail=0
for mod in "$@"; do
	bad=$(nm -D --undefined-only "$mod" | awk '{print $NF}' | grep '^cci_')
	if [ -n "$bad" ]; then
		echo "FAIL $(basename "$mod") imports:" $bad
		fail=$((fail + 1))
	else
		echo "ok   $(basename "$mod") imports no cci_* symbol"
		pass=$((pass + 1))
	fi
done
[ $# -gt 0 ] || { echo "no plugin module given"; fail=1; }
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
