/*
 * ifaddr.c - the address of a named interface; see ifaddr.h.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "cci.h"
#include "ifaddr.h"

int cci__ifa_usable(const struct ifaddrs *ifa)
{
	int fam = ifa->ifa_addr ? ifa->ifa_addr->sa_family : AF_UNSPEC;

	return (fam == AF_INET || fam == AF_INET6) && (ifa->ifa_flags & IFF_UP) &&
	       !(fam == AF_INET6 &&
	         IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr));
}

int cci__if_addr(const char *ifname, int family, int usable_only, struct sockaddr_storage *ss)
{
	struct ifaddrs *all;
	int found = 0;

	if (getifaddrs(&all) != 0)
		return 0;
	for (int pass = 0; pass < 2 && !found; pass++) {
		int want = family != AF_UNSPEC ? family : (pass == 0 ? AF_INET : AF_INET6);
		for (struct ifaddrs *ifa = all; ifa && !found; ifa = ifa->ifa_next) {
			if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != want ||
			    (usable_only && !cci__ifa_usable(ifa)) || strcmp(ifa->ifa_name, ifname) != 0)
				continue;
			memcpy(ss, ifa->ifa_addr, want == AF_INET6 ? sizeof(struct sockaddr_in6)
			                                           : sizeof(struct sockaddr_in));
			found = 1;
		}
	}
	freeifaddrs(all);
	return found;
}

int cci__if_addr_str(const char *ifname, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	const void *a;

	if (!cci__if_addr(ifname, AF_UNSPEC, 0, &ss))
		return 0;
	a = ss.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
	                            : (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
	return inet_ntop(ss.ss_family, a, buf, (socklen_t)len) != NULL;
}

void cci__sockaddr_host(const struct sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]", a);
	} else {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s", a);
	}
}

void cci__sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char h[INET6_ADDRSTRLEN + 2];
	unsigned port;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) {
		snprintf(buf, len, "(address family %d)", sa->sa_family);
		return;
	}
	cci__sockaddr_host(sa, h, sizeof(h));
	port = ntohs(((const struct sockaddr_in *)sa)->sin_port); /* same place in sin6 */
	snprintf(buf, len, "%s:%u", h, port);
}

int cci__addr_resolve(const char *host, uint16_t port, int family, struct sockaddr_storage *ss,
                      socklen_t *len_p)
{
	struct addrinfo hints = { .ai_family = family, .ai_socktype = SOCK_STREAM,
	                          .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char port_s[8];

	snprintf(port_s, sizeof(port_s), "%u", port);
	if (getaddrinfo(host, port_s, &hints, &res) != 0 || !res)
		return CCI_EADDRNOTAVAIL;
	if (res->ai_addrlen > sizeof(*ss) ||
	    (res->ai_family != AF_INET && res->ai_family != AF_INET6)) {
		freeaddrinfo(res);
		return CCI_EADDRNOTAVAIL;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	if (len_p)
		*len_p = res->ai_addrlen;
	freeaddrinfo(res);
	return CCI_SUCCESS;
}
