/*
 * perf_util.h - what every benchmark program shares: an error exit that
 * names the program and explains a CCI status, a clock, option parsing,
 * device lookup and the -o URI file.  Public API (cci.h) only.
 */
#ifndef CCI_PERF_UTIL_H
#define CCI_PERF_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "cci.h"

/* The program name for messages, and the endpoint whose cci_strerror
 * explains a failed call (NULL until there is one).  Neither is copied. */
void perf_set_prog(const char *prog);
void perf_set_ep(cci_endpoint_t *ep);

/* "prog: message" on stderr, then exit(EXIT_FAILURE). */
void perf_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* perf_die("WHAT failed: <cci_strerror>") unless rc is CCI_SUCCESS. */
void perf_check(int rc, const char *what);
uint64_t perf_now_ns(void);

/* A byte count with an optional k, m or g suffix (powers of 1024). */
uint64_t perf_parse_size(const char *s);
/* The same, within min .. max. */
uint32_t perf_parse_count(const char *s, uint32_t min, uint32_t max);
/* ro, ru, and uu when allowed. */
cci_conn_attribute_t perf_parse_attr(const char *s, bool allow_uu);
const char *perf_attr_name(cci_conn_attribute_t a);
/* "msg", "rma_write" or "rma_read". */
const char *perf_mode_name(uint32_t rma_op);

/* The benchmarks' control messages start with a 64-bit magic that no data
 * payload holds.  ev's payload when it is size bytes and starts with
 * magic, else NULL (a data message).  Valid until ev is returned. */
const void *perf_ctl_payload(const cci_event_t *ev, uint32_t size, uint64_t magic);

/* Sleep on the OS handle fd of ep until it turns readable or deadline
 * (perf_now_ns time, 0: none) passes; false when it passed.  Arms the
 * handle first: if events are already waiting, returns at once. */
bool perf_block_on_fd(cci_endpoint_t *ep, int fd, uint64_t deadline);

/* The device called name, or exit listing the devices there are. */
cci_device_t *perf_find_device(const char *name);
/* Write uri to path through a temporary file and a rename, so that a
 * script polling for the file never reads half a URI. */
void perf_write_uri(const char *path, const char *uri);

#endif /* CCI_PERF_UTIL_H */
