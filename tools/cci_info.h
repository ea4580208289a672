/*
 * cci_info.h - what the parts of cci_info share.
 */
#ifndef CCI_INFO_H
#define CCI_INFO_H

#include "cci.h"

/* A JSON string (or null for NULL) on stdout; bytes that are not UTF-8
 * become U+FFFD, so the document always parses. */
void info_json_str(const char *s);

/* List the leftovers of this host (cci_info_leftovers.c): the sm bases of
 * devices (may be NULL: the default base only) are looked in too.  With
 * remove, those of dead processes are removed.  Returns the exit status:
 * 0, or 1 when a directory could not be read or a leftover not removed. */
int info_leftovers(cci_device_t *const *devices, int remove, int json);

#endif /* CCI_INFO_H */
