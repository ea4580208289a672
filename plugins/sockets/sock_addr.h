/*
 * sock_addr.h - devices and addresses of the socket transports: interface
 * discovery, the ini keys of a device section, URIs <-> socket addresses.
 * Shared by the tcp transport and the UDP one.
 */
#ifndef CCI_SOCK_ADDR_H
#define CCI_SOCK_ADDR_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cci_plugin.h"

#define SOCK_HOST_LEN (INET6_ADDRSTRLEN + IF_NAMESIZE + 4)

/*
 * A device: where endpoints bind and what their URI advertises.  Lives in
 * dev->priv from discover()/dev_configure() to dev_free().
 */
struct sock_dev {
	struct sockaddr_storage addr; /* bind address (port 0); AF_INET any = all */
	socklen_t addrlen;
	char ifname[IF_NAMESIZE];     /* "" when not tied to an interface */
	char host[SOCK_HOST_LEN];     /* URI host: never a wildcard address */
	uint16_t port;                /* port= : endpoints' default port, 0 = any */
	uint32_t mss;                 /* mss= */
	uint32_t bufsize;             /* bufsize= : SO_SNDBUF/SO_RCVBUF, 0 = kernel's */
	int manual_progress;          /* progress=manual: no progress thread */
	int up;
	char info[192];
};

/*
 * The ini keys of a device section, in the order of the transport's
 * table (struct cci_conf_key, parsed into a struct sock_dev), which gives
 * each transport its own limits.
 */
enum sock_key {
	SOCK_KEY_IP,        /* CCI_CONF_CUSTOM into addr, checked by sock_conf_ip */
	SOCK_KEY_INTERFACE, /* into ifname */
	SOCK_KEY_PORT,      /* into port */
	SOCK_KEY_MSS,       /* into mss */
	SOCK_KEY_BUFSIZE,   /* into bufsize */
	SOCK_KEY_PROGRESS,  /* auto or manual, into manual_progress */
	SOCK_KEY_COUNT
};

/* The check of ip=: a numeric IPv4 or IPv6 address, not IPv6
 * link-local, into the struct sockaddr_storage at field. */
int sock_conf_ip(const char *value, void *field, char *why, size_t whylen);

/* What tells the socket transports' devices apart (tcp, sock). */
struct sock_transport {
	const char *name;                /* "tcp", "sock": device names */
	const char *proto;               /* "TCP/IP", "UDP": in each device's info */
	uint32_t mss;                    /* mss of discovered devices */
	const struct cci_plugin *plugin; /* the devices' plugin */
	const struct cci_conf_key *keys; /* its key table, indexed by enum sock_key */
};

/*
 * discover(): one device per address of every interface that is up,
 * loopback included (IPv6 link-local addresses are skipped: their URIs
 * would need a zone), added with core->dev_add().  Names: "<name>-<ifname>"
 * for IPv4, "<name>6-<ifname>" for IPv6, with "-2", "-3", ... for further
 * addresses of one interface.
 */
int sock_devs_discover(const struct cci_core *core, const struct sock_transport *t);

/*
 * dev_configure(): read dev's config section through core->conf_parse
 * with t's keys, then settle the bind address from ip= and interface=,
 * and publish the device.  An unknown key or a bad value is reported by
 * the core and gives CCI_EINVAL.
 */
int sock_devs_configure(const struct cci_core *core, const struct sock_transport *t,
                        cci__dev_t *dev);

/* dev_free(): the struct sock_dev of either. */
void sock_devs_free(cci__dev_t *dev);

/* "port" of cci_create_endpoint_at: decimal 0..65535, nothing else. */
int sock_parse_port(const char *service, uint16_t *port);

/* "scheme://host:port" -> a socket address (port must not be 0).
 * CCI_EINVAL if it does not parse, CCI_EADDRNOTAVAIL if host has no address. */
int sock_uri_resolve(const char *uri, const char *scheme, struct sockaddr_storage *ss,
                     socklen_t *len);

/* "scheme://host:port" of an endpoint of d bound to port; malloc'd. */
char *sock_uri_make(const char *scheme, const struct sock_dev *d, uint16_t port);

/* "1.2.3.4:5" or "[::1]:5", for log lines naming a peer. */
void sock_addr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif /* CCI_SOCK_ADDR_H */
