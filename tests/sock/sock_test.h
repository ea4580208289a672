/*
 * sock_test.h - what the sock transport tests share: the library on one
 * loopback sock device, two endpoints of one process polled by one thread,
 * a connection between them (straight or through the lossy relay), and
 * numbered messages whose bytes follow from their number.
 *
 * Every wait is bounded in time; every loop in count or time.
 */
#ifndef SOCK_TEST_H
#define SOCK_TEST_H

#include <stdint.h>

#include <CUnit/CUnit.h>

#include "cci.h"
#include "lossy_relay.h"

uint64_t sk_now_ms(void);

/* cci_init with the sock plugin only and one device on 127.0.0.1 (extra
 * lines of its section in extra, or NULL); the device or NULL. */
cci_device_t *sk_init(const char *extra);
void sk_fini(void);
/* The port of a sock:// URI. */
uint16_t sk_uri_port(const char *uri);

/* A server endpoint and a client endpoint connected with attr, straight
 * or (relay conf given) through a lossy relay. */
struct sk_pair {
	cci_endpoint_t *srv, *cli;
	cci_connection_t *sc, *cc;  /* the server's and the client's side */
	struct lossy_relay *relay;
	uint16_t srv_port;
};
/* 0 on success; failures are recorded as assertions.  extra: more lines
 * of the device's section, or NULL. */
int sk_pair_open(struct sk_pair *p, cci_conn_attribute_t attr,
                 const struct lossy_relay_conf *relay, const char *extra);
/* The same, the client endpoint with an OS handle (cci_create_endpoint's
 * fd) in *cli_fd. */
int sk_pair_open_fd(struct sk_pair *p, cci_conn_attribute_t attr,
                    const struct lossy_relay_conf *relay, const char *extra,
                    cci_os_handle_t *cli_fd);
void sk_pair_close(struct sk_pair *p);

/* Message seq: its length (1 .. max, at least min) and bytes. */
uint32_t sk_msg_len(uint32_t seq, uint32_t min, uint32_t max);
void sk_msg_fill(uint32_t seq, uint8_t *buf, uint32_t len);
/* Does buf (len) hold message seq?  With min >= 4 the first 4 bytes name seq. */
int sk_msg_check(uint32_t seq, const uint8_t *buf, uint32_t len, uint32_t min, uint32_t max);
uint64_t sk_fnv(const void *buf, uint64_t len);

/* Tests. */
void t_relay_ro_stream(void);
void t_relay_ru_stream(void);
void t_relay_uu_no_dups(void);
void t_relay_rma_write_4m(void);
void t_relay_blackout_recovers(void);
void t_relay_blackout_keepalive(void);
void t_slow_receiver_not_overrun(void);
void t_hostile_datagrams(void);
void t_restarted_peer_not_mistaken(void);
void t_hello_after_close_posts_no_request(void);
void t_second_accept_answered_with_bye(void);
void t_ack_after_answer(void);
void t_ack_wakes_os_handle(void);
void t_icmp_refuses_its_connect(void);
void t_icmp_does_not_break_open_connection(void);
void t_icmp_breaks_silent_peer(void);
void t_icmp_needs_three_errors(void);
void t_due_timers_among_idle(void);

#endif /* SOCK_TEST_H */
