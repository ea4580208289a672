#!/bin/sh
# libcci.so exports only cci_* symbols, the API's and the extension's, and
# carries SONAME libcci.so.2.
set -u
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRW]/ {print $3}' | grep -v '^cci_' | grep -v '^CCI_2$')
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
fail=0
if [ -n "$bad" ]; then echo "exported symbols outside cci_*: $bad"; fail=1; fi
if [ "$soname" != "libcci.so.2" ]; then echo "SONAME is '$soname', expected libcci.so.2"; fail=1; fi
n=$(nm -D --defined-only "$lib" | grep -c ' T cci_')
echo "exported functions: $n"
# The 21 functions of the CCI 2 API and the 4 of the plugin-info extension.
if [ "$n" -lt 25 ]; then echo "expected the 21 functions of the API and the 4 of the extension"; fail=1; fi
for f in cci_get_plugins cci_get_plugin_keys cci_get_plugin_dirs cci_get_device_priority; do
	if ! nm -D --defined-only "$lib" | grep -q " T $f@@CCI_2\$"; then
		echo "extension function $f is not exported"; fail=1
	fi
done
if [ $fail -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
