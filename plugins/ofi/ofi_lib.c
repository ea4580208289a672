/*
 * ofi_lib.c - libfabric, loaded when a device of this transport is first
 * wanted rather than with the module.
 *
 * Loading libfabric.so.1 loads the libraries of its providers too (psm2,
 * verbs, ...), which takes a fifth of a second and leaves allocations of
 * their constructors behind when unloaded again: a process that excludes
 * this transport (CCI_CTP), or whose config names none of its devices,
 * must pay none of it.  So the module does not link libfabric; its few
 * exported functions are looked up here, at the versions of the 1.17
 * headers we are built with (the rest of the API is inline, through the
 * objects' ops tables).  Once loaded, libfabric stays (RTLD_NODELETE): it
 * sets its providers up once per process and must find them as they were
 * at the next cci_init.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "ofi.h"

struct ofi_lib ofi_lib;

static void *lib_sym(void *dl, const char *name, const char *version)
{
	void *p = dlvsym(dl, name, version);

	return p ? p : dlsym(dl, name);
}

static int lib_resolve(void *dl)
{
	/* Object pointers to function pointers: POSIX guarantees dlsym's. */
	*(void **)&ofi_lib.getinfo = lib_sym(dl, "fi_getinfo", "FABRIC_1.3");
	*(void **)&ofi_lib.freeinfo = lib_sym(dl, "fi_freeinfo", "FABRIC_1.3");
	*(void **)&ofi_lib.dupinfo = lib_sym(dl, "fi_dupinfo", "FABRIC_1.3");
	*(void **)&ofi_lib.fabric = lib_sym(dl, "fi_fabric", "FABRIC_1.1");
	*(void **)&ofi_lib.strerror = lib_sym(dl, "fi_strerror", "FABRIC_1.0");
	*(void **)&ofi_lib.version = lib_sym(dl, "fi_version", "FABRIC_1.0");
	return ofi_lib.getinfo && ofi_lib.freeinfo && ofi_lib.dupinfo && ofi_lib.fabric &&
	       ofi_lib.strerror && ofi_lib.version;
}

/* Load libfabric once; CCI_SUCCESS, or CCI_ENODEV with why set. */
int ofi_lib_load(const char **why)
{
	static char reason[256];
	uint32_t v;
	void *dl;

	if (ofi_lib.loaded)
		return CCI_SUCCESS;
	/* Its libraries' constructors must not take the application's
	 * signals (ofi_signal.c). */
	dl = ofi_sig_dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!dl)
		snprintf(reason, sizeof(reason), "cannot load libfabric: %s", dlerror());
	else if (!lib_resolve(dl))
		snprintf(reason, sizeof(reason), "libfabric.so.1 lacks the functions of its 1.x API");
	else if ((v = ofi_lib.version()) < OFI_API_VERSION) /* major << 16 | minor */
		snprintf(reason, sizeof(reason), "libfabric %u.%u is older than %u.%u", FI_MAJOR(v),
		         FI_MINOR(v), FI_MAJOR(OFI_API_VERSION), FI_MINOR(OFI_API_VERSION));
	else
		ofi_lib.loaded = 1;
	if (!ofi_lib.loaded)
		*why = reason;
	return ofi_lib.loaded ? CCI_SUCCESS : CCI_ENODEV;
}
