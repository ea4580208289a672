/*
 * progress_key.h - the ini key every transport takes from here:
 * progress = auto | manual, who moves an endpoint between the
 * application's calls.
 *
 *   auto    the engine's thread of each endpoint (engine.h) runs timers and
 *           takes over reading when the application does not poll;
 *   manual  no thread: the application's progress calls run everything
 *           (engine.h, "progress = manual"), as libfabric's
 *           FI_PROGRESS_MANUAL.
 *
 * A transport puts CCI__PROGRESS_KEY(its config struct, an int field) in
 * its key table; the field reads 1 for manual (CCI__PROGRESS_MANUAL), and
 * the transport hands !field to cci__engine_init as threaded.
 */
#ifndef CCI_COMMON_PROGRESS_KEY_H
#define CCI_COMMON_PROGRESS_KEY_H

#include <stddef.h>

#include "cci_plugin.h"

enum { CCI__PROGRESS_AUTO = 0, CCI__PROGRESS_MANUAL = 1 };

/* The words, in that order (progress_key.c). */
extern const char *const cci__progress_modes[];

#define CCI__PROGRESS_KEY(conf_struct, conf_field) { \
	.name = "progress", .type = CCI_CONF_CHOICE, .choices = cci__progress_modes, \
	.def = "auto", .offset = offsetof(conf_struct, conf_field), .size = sizeof(int), \
	.help = "auto: a progress thread per endpoint; manual: none, only the " \
	        "application's calls move the endpoint" }

#endif /* CCI_COMMON_PROGRESS_KEY_H */
