/*
 * net_dev.c - interface discovery, device ini keys and URI parsing for
 * the IP transports, tcp and sock (see net_dev.h).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_dev.h"
#include "plugin.h"
#include "uri.h"

static socklen_t sa_len(int family)
{
	return family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Megabits per second of an interface from sysfs, 0 when unknown. */
static uint64_t if_rate(const char *ifname)
{
	char path[64 + IF_NAMESIZE];
	long mbps = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &mbps) != 1 || mbps <= 0)
		mbps = 0;
	fclose(f);
	return (uint64_t)mbps * 1000000u;
}

/* A discovered device named name: the address of ifa. */
static int dev_add(const struct cci_core *core, const struct net_transport *t,
                   const char *name, const struct ifaddrs *ifa)
{
	const struct sockaddr *sa = ifa->ifa_addr;
	struct net_dev *d = calloc(1, sizeof(*d));
	cci__dev_t *dev;

	if (!d)
		return CCI_ENOMEM;
	memcpy(&d->addr, sa, sa_len(sa->sa_family));
	d->addrlen = sa_len(sa->sa_family);
	((struct sockaddr_in *)&d->addr)->sin_port = 0; /* same offset in sin6 */
	snprintf(d->ifname, sizeof(d->ifname), "%s", ifa->ifa_name);
	cci__sockaddr_host(sa, d->host, sizeof(d->host));
	d->mss = t->mss;
	d->up = 1;
	snprintf(d->info, sizeof(d->info), "%s on %s, address %s", t->proto, ifa->ifa_name, d->host);
	dev = core->dev_add(t->plugin, name);
	if (!dev) {
		free(d);
		return CCI_ENOMEM;
	}
	cci__dev_publish(dev, d, d->up, d->mss, if_rate(ifa->ifa_name), d->info);
	return CCI_SUCCESS;
}

/* How many addresses of this family on this interface came before ifa. */
static int addr_index(const struct ifaddrs *all, const struct ifaddrs *ifa)
{
	int n = 0;

	for (const struct ifaddrs *p = all; p != ifa; p = p->ifa_next)
		if (cci__ifa_usable(p) && p->ifa_addr->sa_family == ifa->ifa_addr->sa_family &&
		    strcmp(p->ifa_name, ifa->ifa_name) == 0)
			n++;
	return n;
}

int net_devs_discover(const struct cci_core *core, const struct net_transport *t)
{
	struct ifaddrs *all, *ifa;
	char name[64];
	int rc = CCI_SUCCESS;

	if (getifaddrs(&all) != 0)
		return CCI_ERROR;
	for (ifa = all; ifa && rc == CCI_SUCCESS; ifa = ifa->ifa_next) {
		char nth[16] = ""; /* "-2", "-3", ... for further addresses */
		int idx;

		if (!cci__ifa_usable(ifa))
			continue;
		idx = addr_index(all, ifa);
		if (idx > 0)
			snprintf(nth, sizeof(nth), "-%d", idx + 1);
		snprintf(name, sizeof(name), "%s%s-%s%s", t->name,
		         ifa->ifa_addr->sa_family == AF_INET6 ? "6" : "", ifa->ifa_name, nth);
		rc = dev_add(core, t, name, ifa);
	}
	freeifaddrs(all);
	return rc;
}

/* The host a wildcard endpoint advertises: the first non-loopback IPv4
 * address that is up, else 127.0.0.1. */
static void wildcard_host(char *buf, size_t len)
{
	struct ifaddrs *all;

	snprintf(buf, len, "127.0.0.1");
	if (getifaddrs(&all) != 0)
		return;
	for (struct ifaddrs *ifa = all; ifa; ifa = ifa->ifa_next) {
		if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET &&
		    (ifa->ifa_flags & IFF_UP) && !(ifa->ifa_flags & IFF_LOOPBACK)) {
			cci__sockaddr_host(ifa->ifa_addr, buf, len);
			break;
		}
	}
	freeifaddrs(all);
}

int net_conf_ip(const char *value, void *field, char *why, size_t whylen)
{
	struct sockaddr_in *s4 = field;
	struct sockaddr_in6 *s6 = field;

	memset(field, 0, sizeof(struct sockaddr_storage));
	if (inet_pton(AF_INET, value, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		return CCI_SUCCESS;
	}
	if (inet_pton(AF_INET6, value, &s6->sin6_addr) == 1 &&
	    !IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) {
		s6->sin6_family = AF_INET6;
		return CCI_SUCCESS;
	}
	snprintf(why, whylen, "is not a numeric IPv4 or IPv6 address (IPv6 link-local "
	         "addresses are not supported)");
	return CCI_EINVAL;
}

/* Settle the bind address from ip= and interface=. */
static void conf_address(const struct cci_core *core, cci__dev_t *dev, struct net_dev *d,
                        int ip_i, int if_i, const char *proto)
{
	struct sockaddr_storage ifaddr;

	if (if_i >= 0 && !cci__if_addr(d->ifname, ip_i >= 0 ? d->addr.ss_family : AF_UNSPEC, 1,
	                                 &ifaddr)) {
		core->log(CCI_LOG_WARN, "device [%s]: interface %s has no usable address%s: "
		          "device is down", dev->pub.name, d->ifname, ip_i >= 0 ? " of that family" : "");
		d->up = 0;
		snprintf(d->info, sizeof(d->info), "interface %s: no address", d->ifname);
		return;
	}
	if (if_i >= 0 && ip_i < 0)
		d->addr = ifaddr;
	if (ip_i < 0 && if_i < 0) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&d->addr;
		memset(&d->addr, 0, sizeof(d->addr));
		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_ANY);
		wildcard_host(d->host, sizeof(d->host));
	} else {
		cci__sockaddr_host((struct sockaddr *)&d->addr, d->host, sizeof(d->host));
	}
	d->addrlen = sa_len(d->addr.ss_family);
	snprintf(d->info, sizeof(d->info), "%s%s%s, address %s%s", proto, d->ifname[0] ? " on " : "",
	         d->ifname, d->host, ip_i < 0 && if_i < 0 ? " (bound to all addresses)" : "");
}

int net_devs_configure(const struct cci_core *core, const struct net_transport *t,
                        cci__dev_t *dev)
{
	struct net_dev *d = calloc(1, sizeof(*d));
	int kv[NET_KEY_COUNT];
	int rc;

	if (!d)
		return CCI_ENOMEM;
	d->up = 1;
	rc = core->conf_parse(dev, t->keys, d, kv);
	if (rc != CCI_SUCCESS) {
		free(d);
		return rc;
	}
	conf_address(core, dev, d, kv[NET_KEY_IP], kv[NET_KEY_INTERFACE], t->proto);
	cci__dev_publish(dev, d, d->up, d->mss, 0, d->info);
	return CCI_SUCCESS;
}

int net_uri_resolve(const char *uri, const char *scheme, struct sockaddr_storage *ss,
                     socklen_t *len)
{
	char sch[16], host[256];
	const char *rest;
	uint16_t port;

	if (uri_split_scheme(uri, sch, sizeof(sch), &rest) != 0 || strcmp(sch, scheme) != 0 ||
	    uri_parse_host_port(rest, host, sizeof(host), &port) != 0 || port == 0)
		return CCI_EINVAL;
	return cci__addr_resolve(host, port, AF_UNSPEC, ss, len);
}

char *net_uri_make(const char *scheme, const struct net_dev *d, uint16_t port)
{
	char *s;

	return asprintf(&s, "%s://%s:%u", scheme, d->host, port) < 0 ? NULL : s;
}
