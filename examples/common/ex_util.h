/*
 * ex_util.h - what the example programs share: a monotonic clock, an
 * event wait that sleeps on the endpoint's OS handle instead of spinning,
 * and URI files that peers exchange through a directory.  Public API
 * (cci.h) only.
 */
#ifndef CCI_EX_UTIL_H
#define CCI_EX_UTIL_H

#include <stdint.h>

#include <cci.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t ex_now_ns(void);

/* A deadline ms milliseconds from now, in ex_now_ns() time. */
uint64_t ex_deadline_ms(uint64_t ms);

/*
 * The next event of ep into *ev_p.  When there is none, sleeps on fd (the
 * OS handle cci_create_endpoint() gave for ep, looking again every few
 * milliseconds) until one comes or deadline_ns (ex_now_ns() time)
 * passes: then CCI_ETIMEDOUT.  A deadline
 * already past polls once.  Other statuses are cci_get_event()'s errors
 * (CCI_ENOBUFS: the caller holds every receive buffer).  The event is lent
 * until cci_return_event().
 */
int ex_event_wait(cci_endpoint_t *ep, int fd, uint64_t deadline_ns,
		  cci_event_t **ev_p);

/* The device called name, or NULL (name NULL: NULL, the default device).
 * Owned by the library until the last cci_finalize(). */
cci_device_t *ex_find_device(const char *name);

/*
 * Write uri and a newline to path through a temporary file and a rename,
 * so that a reader never sees half a URI.  Returns 0 or an errno value.
 */
int ex_uri_write(const char *path, const char *uri);

/*
 * Read the URI in path, waiting (by short sleeps) for the file to appear
 * until deadline_ns.  *uri_p receives a malloc'd string without the
 * newline; the caller frees it.  Returns 0, ETIMEDOUT, or an errno value.
 */
int ex_uri_read(const char *path, uint64_t deadline_ns, char **uri_p);

#endif /* CCI_EX_UTIL_H */
