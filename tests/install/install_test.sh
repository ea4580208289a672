#!/bin/sh
# An installed prefix runs from wherever it lies: `meson install --destdir`
# stages this build, the staged prefix is moved to a directory of its own
# (as a cluster unpacks /opt/cci/<version>), and its programs then find
# libcci.so.2 (their RUNPATH, relative to the binary) and the library finds
# its plugins (beside itself) with LD_LIBRARY_PATH and CCI_PLUGIN_PATH unset.
#
#   install_test.sh MESON BUILD_DIR PREFIX BINDIR LIBDIR VERSION PC PYSITE PYTHON PRELOAD
#
# BINDIR and LIBDIR as meson gives them (relative to PREFIX); PC is
# relocatable-pc when the build writes pkg-config files relative to
# themselves (-Dpkgconfig.relocatable=true, the project's default; a build
# directory configured before that default keeps false until reconfigured).
# PYSITE is where the Python package went (relative to PREFIX) and PYTHON
# its interpreter, or none; PRELOAD is ASan's runtime for that interpreter
# in a sanitized build, or empty.  Every step
# names what it checked when it fails; every wait is bounded.
set -eu
meson=$1 build=$2 prefix=$3 bindir=$4 libdir=$5 version=$6 pc=$7 pysite=$8 python=$9
preload=${10}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cci-install.XXXXXX")
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "install test: $*" >&2
	exit 1
}

"$meson" install -C "$build" --destdir "$tmp/stage" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "meson install --destdir $tmp/stage failed"; }
[ -d "$tmp/stage$prefix" ] || fail "meson install staged nothing under $tmp/stage$prefix"
p=$tmp/opt/cci/$version
mkdir -p "$tmp/opt/cci"
mv "$tmp/stage$prefix" "$p"

# Nothing but the prefix's own paths may lead to the library or plugins.
unset LD_LIBRARY_PATH CCI_PLUGIN_PATH CCI_LIBRARY CCI_CONFIG CCI_CTP
cd "$tmp"

for prog in cci_info pingpong; do
	[ -x "$p/$bindir/$prog" ] || fail "$p/$bindir/$prog was not installed"
	# A libcci.so.2 of a system prefix would also satisfy the loader: the
	# one loaded must be the prefix's own.
	line=$(ldd "$p/$bindir/$prog" | grep 'libcci\.so\.2') || line="no libcci.so.2 at all"
	case $(realpath -m "$(echo "$line" | awk '{ print $3 }')") in
	"$p/$libdir"/*) ;;
	*) fail "$prog: ldd says '$(echo $line)', not a libcci.so.2 of $p/$libdir" ;;
	esac
done

"$p/$bindir/cci_info" --json >"$tmp/info.json" 2>"$tmp/info.err" ||
	{ cat "$tmp/info.err" >&2; fail "the installed cci_info failed"; }
python3 - "$tmp/info.json" "$p/$libdir/cci" <<'EOF' || fail "cci_info: the plugins are not the prefix's"
import json, sys
doc, plugin_dir = json.load(open(sys.argv[1])), sys.argv[2]
dirs = doc["plugin_dirs"]
loaded = [p for p in doc["plugins"] if p["status"] == "loaded"]
ok = plugin_dir in dirs and loaded and all(p["path"].startswith(plugin_dir + "/") for p in loaded)
ok = ok and any(p["name"] == "sm" for p in loaded)
if not ok:
    print("searched %s; loaded %s; expected sm and only plugins of %s" %
          (dirs, [p["path"] for p in loaded], plugin_dir), file=sys.stderr)
sys.exit(0 if ok else 1)
EOF

# A pingpong between two installed processes over sm.
CCI_CTP=sm "$p/$bindir/pingpong" -s -o "$tmp/uri" -t 20 >"$tmp/server.log" 2>&1 &
server=$!
i=0
while [ ! -s "$tmp/uri" ]; do
	kill -0 "$server" 2>/dev/null || { cat "$tmp/server.log" >&2; fail "the installed pingpong server exited"; }
	[ $i -lt 200 ] || fail "the installed pingpong server wrote no URI to $tmp/uri in 20 s"
	sleep 0.1
	i=$((i + 1))
done
CCI_CTP=sm "$p/$bindir/pingpong" -h "$(cat "$tmp/uri")" -i 200 -W 10 -t 20 >"$tmp/client.log" 2>&1 ||
	{ cat "$tmp/client.log" >&2; fail "the installed pingpong client failed"; }
wait "$server" || { cat "$tmp/server.log" >&2; fail "the installed pingpong server failed"; }
server=
grep -q '^ *1 ' "$tmp/client.log" || { cat "$tmp/client.log" >&2; fail "pingpong printed no 1-byte row"; }

# libcci_wire's launcher for one host runs from the prefix.
"$p/$bindir/cci_wire_launch" -n 2 -t 20 sh -c \
	'test -d "$CCI_WIRE_DIR" && test "$CCI_WIRE_SIZE" = 2 && test -n "$CCI_WIRE_RANK"' ||
	fail "the installed cci_wire_launch did not start 2 ranks with their CCI_WIRE_* variables"

# The Python package of the prefix loads the prefix's library, which finds
# its plugins (a device to list) beside itself.
if [ "$pysite" = none ]; then
	echo "Python package not checked: meson installed none inside the prefix"
else
	[ -f "$p/$pysite/cci/_libdir" ] || fail "no $p/$pysite/cci/_libdir"
	PYTHONPATH=$p/$pysite PYTHONDONTWRITEBYTECODE=1 LD_PRELOAD=$preload \
		ASAN_OPTIONS=${preload:+detect_leaks=0:abort_on_error=1} "$python" -c '
import cci
print(cci.__file__)
print(cci.library_path)
print(cci.devices()[0].name)' >"$tmp/py.out" 2>"$tmp/py.err" ||
		{ cat "$tmp/py.err" >&2; fail "import cci from $p/$pysite failed"; }
	{ read -r file && read -r lib && read -r dev; } <"$tmp/py.out"
	case $file:$lib in
	"$p/$pysite/cci/"*:"$p/$libdir/libcci.so.2") ;;
	*) fail "Python: package $file, library $lib; expected both in $p" ;;
	esac
	[ -n "$dev" ] || fail "Python: no device"
fi

# A program built against the prefix's pkg-config files finds the prefix.
if [ "$pc" != relocatable-pc ]; then
	echo "pkg-config file not checked: $build has -Dpkgconfig.relocatable=false" \
		"(meson configure $build -Dpkgconfig.relocatable=true)"
elif ! command -v pkg-config >/dev/null; then
	fail "no pkg-config to check the installed cci.pc (Debian: pkg-config)"
else
	for pc in cci cci-wire; do
		libs=$(PKG_CONFIG_PATH=$p/$libdir/pkgconfig pkg-config --libs $pc) ||
			fail "pkg-config finds no $pc in $p/$libdir/pkgconfig"
		# A relocatable file says ${pcfiledir}/../..: compare resolved paths.
		dir=$(printf '%s\n' $libs | sed -n 's/^-L//p' | head -n 1)
		[ -n "$dir" ] && [ "$(realpath -m "$dir")" = "$p/$libdir" ] ||
			fail "pkg-config --libs $pc gives '$libs', not -L$p/$libdir"
	done
fi
echo "installed prefix $p: cci_info, pingpong, cci_wire_launch and the Python package ran from it"
