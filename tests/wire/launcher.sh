# Sourced: puts before "$@" (the program and its arguments) the command
# that starts N ranks of it under a launcher, on loopback, oversubscribing
# the cores.  Set first (a sourced file takes no arguments in every sh):
#
#   launcher_dir         the directory of this file
#   launcher_backend     local (cci_wire_launch), pmi1 or pmi2 (MPICH's
#                        mpiexec.hydra, PMI-1 or PMI-2) or pmix (Open MPI's mpirun)
#   launcher_n           the number of ranks
#   launcher_local       the path of cci_wire_launch
#   launcher_pmix_built  yes when libcci_wire has its PMIx backend
#   launcher_mode        kill: the launcher keeps the job going when a rank
#                        dies, as far as it can (optional)
#
# Exits 77 (skipped), naming the missing package, when the launcher is not
# installed.
launcher_mode=${launcher_mode:-}

launcher_skip() {
	echo "skipped: $*"
	exit 77
}

launcher_extra=
case $launcher_backend in
local)
	set -- "$launcher_local" -n "$launcher_n" -t 60 "$@"
	;;
pmi1 | pmi2)
	command -v mpiexec.hydra >/dev/null || launcher_skip "no mpiexec.hydra (Debian: mpich)"
	# hydra ends the whole job when a rank dies by a signal, whatever its
	# options; a rank that exits leaves the others running only with
	# -disable-auto-cleanup.
	[ "$launcher_mode" = kill ] && launcher_extra=-disable-auto-cleanup
	# hydra speaks PMI-1 and PMI-2 on the same PMI_FD, whichever the rank's
	# init asks for, and sets nothing that prefers PMI-2: the ranks are told.
	[ "$launcher_backend" = pmi2 ] && launcher_extra="$launcher_extra -genv CCI_WIRE_BACKEND pmi2"
	set -- mpiexec.hydra -launcher fork -iface lo -n "$launcher_n" $launcher_extra "$@"
	;;
pmix)
	[ "$launcher_pmix_built" = yes ] ||
		launcher_skip "libcci_wire was built without PMIx (libpmix-dev not found)"
	command -v mpirun.openmpi >/dev/null || launcher_skip "no mpirun.openmpi (Debian: openmpi-bin)"
	[ "$(id -u)" = 0 ] && launcher_extra=--allow-run-as-root
	# Without it mpirun kills the job when a rank dies.
	[ "$launcher_mode" = kill ] && launcher_extra="$launcher_extra --enable-recovery"
	# Sanitized builds: libpmix's own leftovers at exit (mpirun passes
	# the environment on to the ranks).
	export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$launcher_dir" && pwd)/lsan.supp"
	set -- mpirun.openmpi --oversubscribe --mca btl self --mca oob_tcp_if_include lo \
		--mca plm_rsh_agent false -np "$launcher_n" $launcher_extra "$@"
	;;
*)
	echo "launcher.sh: unknown backend $launcher_backend" >&2
	exit 2
	;;
esac
