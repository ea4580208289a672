/*
 * lossy_relay.h - a UDP relay on 127.0.0.1 for transport tests: peer A
 * sends to the relay's A-side port as if it were B, the relay forwards to
 * B from its B-side port, and B's answers go back the same way.  On the
 * way it drops, duplicates, reorders and delays datagrams at configured
 * rates, deterministically from a seed: each direction draws from its own
 * generator, three draws per datagram in arrival order, so the same
 * datagrams meet the same fate in every run.  A blackout phase drops
 * everything (100% loss) until it is switched off.
 *
 * One thread per relay, started by lossy_relay_start() and joined by
 * lossy_relay_stop(), which returns within a poll period (50 ms).  The
 * other calls may come from any thread.
 */
#ifndef CCI_TESTS_LOSSY_RELAY_H
#define CCI_TESTS_LOSSY_RELAY_H

#include <stdint.h>

enum { LOSSY_A = 0, LOSSY_B = 1 }; /* sides; as directions: A->B and B->A */

struct lossy_relay_conf {
	uint16_t a_port, b_port; /* the relay's own ports; 0 picks free ones */
	uint16_t a_peer, b_peer; /* where A and B listen; 0: the source of their first datagram */
	uint64_t seed;
	uint32_t loss_ppm, dup_ppm, reorder_ppm; /* rates in parts per million */
	uint32_t delay_us;       /* every forwarded datagram */
	uint32_t reorder_us;     /* a reordered one is held this much longer */
};

struct lossy_relay_stats {
	uint64_t received[2];   /* by direction (LOSSY_A: came from A, goes to B) */
	uint64_t forwarded[2];  /* sent on, duplicates included */
	uint64_t dropped[2];    /* by the loss rate */
	uint64_t blackout[2];   /* dropped by the blackout */
	uint64_t duplicated[2];
	uint64_t reordered[2];
	uint64_t unroutable;    /* the other peer's address was not known yet */
	uint64_t overflow;      /* more held datagrams than the relay keeps */
};

struct lossy_relay;

/* Bind both ports and start the thread: 0 and *relay_p, or -1 (errno set). */
int lossy_relay_start(const struct lossy_relay_conf *conf, struct lossy_relay **relay_p);

/* The relay's port on a side (peer A sends to the LOSSY_A port). */
uint16_t lossy_relay_port(const struct lossy_relay *r, int side);

/* Switch the 100% loss phase on (1) or off (0). */
void lossy_relay_blackout(struct lossy_relay *r, int on);

void lossy_relay_get_stats(struct lossy_relay *r, struct lossy_relay_stats *st);

/* Stop the thread, drop what is held, free r. */
void lossy_relay_stop(struct lossy_relay *r);

#endif /* CCI_TESTS_LOSSY_RELAY_H */
