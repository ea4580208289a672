/*
 * blackhole.h - a peer address whose packets vanish, for the connect
 * failure tests: this process moves into a network namespace of its own
 * with a veth pair whose far end sits in a second namespace; that end
 * owns F_BH_PEER and drops every IP packet it receives (an nftables input
 * chain with policy drop), so SYNs and datagrams are never answered, not
 * even by a reset or an ICMP error.  ARP is answered, so the sender sees
 * no "host unreachable" either: a silent peer, as behind a firewall that
 * drops.
 *
 * Both namespaces are anonymous: this process holds the first, a holder
 * child the second, and the kernel removes them (and the veth pair) when
 * their last process ends, even if the test is killed.  Nothing is named
 * on the host and no address outside them is ever used.
 */
#ifndef FAULT_BLACKHOLE_H
#define FAULT_BLACKHOLE_H

#include <stdint.h>
#include <sys/types.h>

#define F_BH_LOCAL "10.213.0.1"    /* this side of the pair, /30 */
#define F_BH_PEER "10.213.0.2"     /* the dropping side */
#define F_BH_IFACE "cci-bh0"       /* this side's interface */

struct f_blackhole {
	pid_t holder;        /* keeps the peer namespace alive */
	int holder_fd;       /* closing it ends the holder */
	int ns_self, ns_peer;
	uint64_t dropped;    /* packets the probes saw dropped */
};

/*
 * Build the blackhole (call before cci_init, while single-threaded).
 * Returns NULL, or why it cannot be built here (not root, no ip or nft
 * command, the kernel refuses): the caller skips.  The probes that prove
 * the path really drops are checks: a path that does not is a failure.
 */
const char *f_blackhole_make(struct f_blackhole *bh);

/* Packets the peer namespace's drop rule has counted (-1: unreadable). */
long long f_blackhole_drops(struct f_blackhole *bh);

/* End the holder (the peer namespace goes with it). */
void f_blackhole_end(struct f_blackhole *bh);

#endif /* FAULT_BLACKHOLE_H */
