/*
 * progress_key.c - see progress_key.h.
 */
#include "progress_key.h"

const char *const cci__progress_modes[] = { "auto", "manual", NULL };
