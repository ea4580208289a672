/*
 * tcp_test.h - what the tcp transport tests share: library set-up on a
 * loopback device, bounded event waits, peer processes, and a raw TCP
 * client that speaks (or mangles) the wire protocol.
 *
 * Every wait is bounded in time; every loop in count or time.
 */
#ifndef SOCKETS_TEST_H
#define SOCKETS_TEST_H

#include <stdint.h>
#include <sys/types.h>

#include <CUnit/CUnit.h>

#include "cci.h"

/* ---- library ------------------------------------------------------------- */

/* cci_init with only the tcp plugin and one tcp device bound to ip
 * ("127.0.0.1" for most tests).  Returns the device or NULL (a failed
 * assertion has been recorded). */
cci_device_t *st_init(const char *ip);
/* As st_init for transport "tcp" or "sock" (the UDP transport, whose
 * module is loaded instead). */
cci_device_t *st_init_as(const char *transport, const char *ip);
/* As st_init, with this config text; the device of its first section. */
cci_device_t *st_init_conf(const char *text);
void st_fini(cci_endpoint_t *ep);
cci_endpoint_t *st_endpoint(cci_device_t *dev);
char *st_uri(cci_endpoint_t *ep);
/* The port of a tcp:// URI. */
uint16_t st_uri_port(const char *uri);

uint64_t st_now_ms(void);
void st_sleep_ms(unsigned ms);

/* The next event of type within ms; others are returned and counted in
 * *others when not NULL.  NULL on timeout. */
cci_event_t *st_wait(cci_endpoint_t *ep, cci_event_type_t type, unsigned ms, int *others);
/* Accept the next request within ms; returns the connection or NULL. */
cci_connection_t *st_accept(cci_endpoint_t *ep, unsigned ms);
/* Connect and wait for the outcome; the connection or NULL (*status set). */
cci_connection_t *st_connect(cci_endpoint_t *ep, const char *uri, cci_conn_attribute_t attr,
                             unsigned ms, int *status);

/* ---- peer processes ------------------------------------------------------ */

struct st_child {
	pid_t pid;
	int rfd;   /* parent reads what the child writes */
	int wfd;   /* parent writes to the child */
};

/* Fork fn(rfd, wfd, arg) in a child; its return value is the exit status.
 * Call before this process's own cci_init. */
void st_spawn(struct st_child *c, int (*fn)(int rfd, int wfd, void *arg), void *arg);
/* Wait up to ms for the child; its exit status, or -1 (then it is killed). */
int st_reap(struct st_child *c, unsigned ms);
/* Line I/O on the pipes, bounded by ms. */
int st_write_line(int fd, const char *s);
int st_read_line(int fd, char *buf, size_t len, unsigned ms);

/* ---- raw wire client ----------------------------------------------------- */

/* A blocking TCP connection to 127.0.0.1:port (receive timeout 3 s). */
int raw_connect(uint16_t port);
int raw_send(int fd, const void *buf, size_t len);
/* Read one whole frame (header and payload, up to cap bytes) within ms:
 * its payload length, or -1. */
int raw_frame(int fd, uint8_t *buf, size_t cap, unsigned ms);
/* Did the peer close the connection within ms? */
int raw_closed(int fd, unsigned ms);
/* Encode a frame header into b (24 bytes). */
void raw_hdr(uint8_t *b, uint8_t type, uint32_t len, uint64_t seq, uint64_t ack);

/* ---- suites -------------------------------------------------------------- */

/* After every test, even one a fatal assertion ended: finalize what the
 * test left initialised, so the next test (and its forked peers) starts
 * from nothing. */
void st_teardown(void);

int st_add_wire_tests(void);
int st_add_raw_tests(void);
int st_add_peer_tests(void);
int st_add_watch_tests(void);
int st_add_manual_tests(void);
int st_add_burst_tests(void);
int st_add_limits_tests(void);
int st_add_timeout_tests(void);

#endif /* SOCKETS_TEST_H */
