/*
 * ifaddr.h - the address of a network interface named in a
 * configuration (the iface= keys of the tcp, sock and ofi devices),
 * looked up once when the device is configured; socket addresses as text
 * and from host names.
 *
 * Each call reads getifaddrs() afresh and frees it: nothing is kept, no
 * state is shared, any thread may call.
 */
#ifndef CCI_COMMON_IFADDR_H
#define CCI_COMMON_IFADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * The first address of interface ifname of family (AF_INET or AF_INET6),
 * or an IPv4 one before an IPv6 one when family is AF_UNSPEC, copied into
 * *ss (sockaddr_in or sockaddr_in6).  usable_only: pass over an interface
 * that is down and IPv6 link-local addresses (a URI would need a zone).
 * Returns 1 when found, 0 otherwise.
 */
int cci__if_addr(const char *ifname, int family, int usable_only, struct sockaddr_storage *ss);

/* Is this interface address one a device can use: IPv4 or IPv6, on an
 * interface that is up, not IPv6 link-local? */
struct ifaddrs;
int cci__ifa_usable(const struct ifaddrs *ifa);

/* The first address of ifname (IPv4 before IPv6, up or not) printed
 * numerically into buf, without brackets.  1 when found, 0 otherwise. */
int cci__if_addr_str(const char *ifname, char *buf, size_t len);

/* The numeric host of sa (AF_INET6, else AF_INET), an IPv6 one in
 * brackets: the host of a URI. */
void cci__sockaddr_host(const struct sockaddr *sa, char *buf, size_t len);

/* "1.2.3.4:5" or "[::1]:5" (another family: "(address family N)"), for
 * URIs and log lines naming a peer. */
void cci__sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);

/* host (a name or a numeric address) and port into *ss (AF_INET or
 * AF_INET6; family, unless AF_UNSPEC) and its length into *len_p (unless
 * NULL): CCI_SUCCESS, or CCI_EADDRNOTAVAIL when nothing resolves.  A name
 * is resolved with getaddrinfo, which may block. */
int cci__addr_resolve(const char *host, uint16_t port, int family, struct sockaddr_storage *ss,
                      socklen_t *len_p);

#endif /* CCI_COMMON_IFADDR_H */
