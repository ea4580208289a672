/*
 * exit_audit.c - an rtld-audit module (LD_AUDIT) for t_exit.c: the dynamic
 * loader calls la_objclose for an object right after its destructors ran
 * at exit, so this sees the process just after libfabric's destructor, a
 * moment no code of the process itself can reach.  There it checks that
 * SIGTERM's disposition is the application's (the child installs none:
 * SIG_DFL), not a provider's handler that would read what that destructor
 * freed, and then raises SIGTERM: the process must die by it.  A
 * provider's handler still installed makes it exit with status 3 instead.
 * It runs in the loader's audit namespace, with a libc of its own: only
 * system calls and stdio here.
 */
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "exit_audit.h"

unsigned int la_version(unsigned int version)
{
	(void)version;
	return LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	(void)lmid;
	*cookie = (uintptr_t)map;
	return 0;
}

unsigned int la_objclose(uintptr_t *cookie)
{
	const struct link_map *map = (const struct link_map *)*cookie;
	struct sigaction now;

	if (!map->l_name || !strstr(map->l_name, "/libfabric.so"))
		return 0;
	if (sigaction(SIGTERM, NULL, &now) != 0 || now.sa_handler != SIG_DFL) {
		fprintf(stderr, "exit_audit: after libfabric's destructor, SIGTERM is still handled "
		        "(flags %#x)\n", (unsigned)now.sa_flags);
		_exit(EXIT_AUDIT_STILL_HANDLED);
	}
	raise(SIGTERM);
	return 0;
}
