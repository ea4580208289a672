/*
 * net_dev.h - devices and addresses of the IP transports (tcp, sock): interface
 * discovery, the ini keys of a device section, URIs <-> socket addresses.
 * Shared by the tcp transport and the UDP one.
 */
#ifndef CCI_NET_DEV_H
#define CCI_NET_DEV_H

#include <net/if.h>
#include <stddef.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cci_plugin.h"
#include "ifaddr.h" /* cci__sockaddr_str names peers */
#include "progress_key.h"

#define NET_HOST_LEN (INET6_ADDRSTRLEN + IF_NAMESIZE + 4)

/*
 * A device: where endpoints bind and what their URI advertises.  Lives in
 * dev->priv from discover()/dev_configure() to dev_free().
 */
struct net_dev {
	struct sockaddr_storage addr; /* bind address (port 0); AF_INET any = all */
	socklen_t addrlen;
	char ifname[IF_NAMESIZE];     /* "" when not tied to an interface */
	char host[NET_HOST_LEN];     /* URI host: never a wildcard address */
	uint16_t port;                /* port= : endpoints' default port, 0 = any */
	uint32_t mss;                 /* mss= */
	uint32_t bufsize;             /* bufsize= : SO_SNDBUF/SO_RCVBUF, 0 = kernel's */
	int manual_progress;          /* progress=manual: no progress thread (progress_key.h) */
	int up;
	char info[192];
};

/*
 * The ini keys of a device section, in the order of the transport's
 * table (struct cci_conf_key, parsed into a struct net_dev), which gives
 * each transport its own limits.
 */
enum net_key {
	NET_KEY_IP,        /* CCI_CONF_CUSTOM into addr, checked by net_conf_ip */
	NET_KEY_INTERFACE, /* into ifname */
	NET_KEY_PORT,      /* into port */
	NET_KEY_MSS,       /* into mss */
	NET_KEY_BUFSIZE,   /* into bufsize */
	NET_KEY_PROGRESS,  /* auto or manual, into manual_progress (progress_key.h) */
	NET_KEY_COUNT
};

/*
 * The initializer of a socket transport's key table (a static const
 * struct cci_conf_key[], in enum net_key order): the keys are the same,
 * the transport gives what differs, its mss range and default (a plain
 * decimal literal macro, see CCI_CONF_NUM), bufsize's maximum, and the help
 * sentences of port, interface and bufsize.
 */
#define NET_CONF_KEYS(mss_min, mss_max, mss_def, buf_max, if_help, port_help, buf_help) { \
	[NET_KEY_IP] = { \
		.name = "ip", .type = CCI_CONF_CUSTOM, .check = net_conf_ip, \
		.offset = offsetof(struct net_dev, addr), .size = sizeof(struct sockaddr_storage), \
		.help = "numeric IPv4 or IPv6 address to bind and advertise (default: all IPv4 " \
		        "addresses; the URI shows the first non-loopback one, else 127.0.0.1)" }, \
	[NET_KEY_INTERFACE] = { \
		.name = "interface", .type = CCI_CONF_STRING, \
		.offset = offsetof(struct net_dev, ifname), .size = IF_NAMESIZE, .help = if_help }, \
	[NET_KEY_PORT] = { \
		.name = "port", .type = CCI_CONF_UINT, .min = 0, .max = 65535, .def = "0", \
		.offset = offsetof(struct net_dev, port), .size = sizeof(uint16_t), \
		.help = port_help }, \
	[NET_KEY_MSS] = { \
		.name = "mss", .type = CCI_CONF_UINT, .min = (mss_min), .max = (mss_max), \
		.def = CCI_CONF_NUM(mss_def), \
		.offset = offsetof(struct net_dev, mss), .size = sizeof(uint32_t), \
		.help = "largest message, in bytes" }, \
	[NET_KEY_BUFSIZE] = { \
		.name = "bufsize", .type = CCI_CONF_UINT, .min = 0, .max = (buf_max), \
		.def = "0", .offset = offsetof(struct net_dev, bufsize), .size = sizeof(uint32_t), \
		.help = buf_help }, \
	[NET_KEY_PROGRESS] = CCI__PROGRESS_KEY(struct net_dev, manual_progress), \
	[NET_KEY_COUNT] = { .name = NULL }, \
}

/* The check of ip=: a numeric IPv4 or IPv6 address, not IPv6
 * link-local, into the struct sockaddr_storage at field. */
int net_conf_ip(const char *value, void *field, char *why, size_t whylen);

/* What tells the IP transports' devices apart (tcp, sock). */
struct net_transport {
	const char *name;                /* "tcp", "sock": device names */
	const char *proto;               /* "TCP/IP", "UDP": in each device's info */
	uint32_t mss;                    /* mss of discovered devices */
	const struct cci_plugin *plugin; /* the devices' plugin */
	const struct cci_conf_key *keys; /* its key table, indexed by enum net_key */
};

/*
 * discover(): one device per address of every interface that is up,
 * loopback included (IPv6 link-local addresses are skipped: their URIs
 * would need a zone), added with core->dev_add().  Names: "<name>-<ifname>"
 * for IPv4, "<name>6-<ifname>" for IPv6, with "-2", "-3", ... for further
 * addresses of one interface.
 */
int net_devs_discover(const struct cci_core *core, const struct net_transport *t);

/*
 * dev_configure(): read dev's config section through core->conf_parse
 * with t's keys, then settle the bind address from ip= and interface=,
 * and publish the device.  An unknown key or a bad value is reported by
 * the core and gives CCI_EINVAL.
 */
int net_devs_configure(const struct cci_core *core, const struct net_transport *t,
                        cci__dev_t *dev);

/* dev_free is cci__dev_free_priv (plugin.h): a struct net_dev is one block. */

/* "scheme://host:port" -> a socket address (port must not be 0).
 * CCI_EINVAL if it does not parse, CCI_EADDRNOTAVAIL if host has no address. */
int net_uri_resolve(const char *uri, const char *scheme, struct sockaddr_storage *ss,
                     socklen_t *len);

/* "scheme://host:port" of an endpoint of d bound to port; malloc'd. */
char *net_uri_make(const char *scheme, const struct net_dev *d, uint16_t port);

#endif /* CCI_NET_DEV_H */
