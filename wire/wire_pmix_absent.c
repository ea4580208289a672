/*
 * wire_pmix_absent.c - the PMIx backend of a library built without
 * libpmix-dev: a PMIx launcher is recognised and refused by name, rather
 * than the job falling through to another backend's error.
 */
#include <stdlib.h>

#include "wire_int.h"

int wire_pmix_open(struct cci_wire *w)
{
	if (!getenv("PMIX_RANK") || !getenv("PMIX_NAMESPACE"))
		return CCI_WIRE_ENOLAUNCHER;
	return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
	                 "PMIX_RANK and PMIX_NAMESPACE are set (a PMIx launcher), but this "
	                 "libcci_wire was built without PMIx (libpmix-dev was not found)");
}
