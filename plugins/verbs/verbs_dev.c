/*
 * verbs_dev.c - devices: the RDMA adapters and ports libibverbs lists,
 * discovery without a config file (one CCI device per active port), the
 * ini keys of a config section, and addresses (the IP address rdma_cm
 * binds an endpoint to, verbs:// URIs).
 *
 * rdma_cm finds the adapter from an IP address, so every device needs
 * one: the ip= or interface= of its section, else the first address of
 * the host that rdma_cm maps to the adapter's port (IPoIB on InfiniBand,
 * the Ethernet interface on RoCE).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "verbs.h"

#define VERBS_NO_DEVICE "no RDMA device found (ibv_get_device_list returned none)"

enum verbs_key {
	VERBS_KEY_DEVICE, VERBS_KEY_HCA, VERBS_KEY_PORT, VERBS_KEY_IP, VERBS_KEY_INTERFACE,
	VERBS_KEY_MSS, VERBS_KEY_SQ, VERBS_KEY_RECV, VERBS_KEY_PROGRESS, VERBS_KEY_COUNT
};

/* A config section as read; "" or 0 when absent. */
struct verbs_conf {
	char device[VERBS_NAME_LEN], hca[VERBS_NAME_LEN];
	uint32_t port;
	char ip[INET6_ADDRSTRLEN], interface[VERBS_NAME_LEN];
	uint32_t mss, sq_depth, recv_count;
	int manual; /* progress = manual (progress_key.h) */
};

static void verbs_fork_init(void)
{
	int rc = ibv_fork_init();

	if (rc != 0)
		VERBS_LOG(CCI_LOG_INIT, "verbs: ibv_fork_init: %s: a child of fork() could take "
		          "over registered pages", strerror(rc < 0 ? -rc : rc));
}

static int check_ip(const char *value, void *field, char *why, size_t whylen)
{
	struct in6_addr a6;
	struct in_addr a4;

	(void)field;
	if (inet_pton(AF_INET, value, &a4) == 1 || inet_pton(AF_INET6, value, &a6) == 1)
		return CCI_SUCCESS;
	snprintf(why, whylen, "is not a numeric IPv4 or IPv6 address");
	return CCI_EINVAL;
}

/* The ini keys, as plugins/verbs/README.md lists them. */
const struct cci_conf_key verbs_conf_keys[] = {
	[VERBS_KEY_DEVICE] = {
		.name = "device", .type = CCI_CONF_STRING, .size = VERBS_NAME_LEN,
		.offset = offsetof(struct verbs_conf, device),
		.help = "the RDMA adapter, as ibv_devices names it (mlx5_0, rxe0); the same as hca= "
		        "(default: the first adapter with an active port)" },
	[VERBS_KEY_HCA] = {
		.name = "hca", .type = CCI_CONF_STRING, .size = VERBS_NAME_LEN,
		.offset = offsetof(struct verbs_conf, hca),
		.help = "another name for device=" },
	[VERBS_KEY_PORT] = {
		.name = "port", .type = CCI_CONF_UINT, .min = 1, .max = 255, .size = sizeof(uint32_t),
		.offset = offsetof(struct verbs_conf, port),
		.help = "the adapter's port, from 1 (default: its first active port)" },
	[VERBS_KEY_IP] = {
		.name = "ip", .type = CCI_CONF_STRING, .size = INET6_ADDRSTRLEN, .check = check_ip,
		.offset = offsetof(struct verbs_conf, ip),
		.help = "the IP address endpoints bind to, which selects the port on RoCE "
		        "(default: an address rdma_cm maps to the port)" },
	[VERBS_KEY_INTERFACE] = {
		.name = "interface", .type = CCI_CONF_STRING, .size = VERBS_NAME_LEN,
		.offset = offsetof(struct verbs_conf, interface),
		.help = "a network interface (ib0, eth0) whose address endpoints bind to; "
		        "instead of ip=" },
	[VERBS_KEY_MSS] = {
		.name = "mss", .type = CCI_CONF_UINT, .min = VERBS_MSS_MIN, .max = VERBS_MSS_MAX,
		.def = CCI_CONF_NUM(VERBS_MSS_DEFAULT), .size = sizeof(uint32_t),
		.offset = offsetof(struct verbs_conf, mss),
		.help = "largest message, in bytes: the size of every receive buffer" },
	[VERBS_KEY_SQ] = {
		.name = "send_queue", .type = CCI_CONF_UINT, .min = 16, .max = 16384,
		.def = CCI_CONF_NUM(VERBS_SQ_DEFAULT), .size = sizeof(uint32_t),
		.offset = offsetof(struct verbs_conf, sq_depth),
		.help = "work requests of each queue pair's send queue" },
	[VERBS_KEY_RECV] = {
		.name = "recv_buffers", .type = CCI_CONF_UINT, .min = 16, .max = VERBS_BUF_COUNT_MAX,
		.def = CCI_CONF_NUM(VERBS_RECV_COUNT_DEFAULT), .size = sizeof(uint32_t),
		.offset = offsetof(struct verbs_conf, recv_count),
		.help = "receive buffers of an endpoint's shared receive queue (its initial "
		        "CCI_OPT_ENDPT_RECV_BUF_COUNT)" },
	[VERBS_KEY_PROGRESS] = CCI__PROGRESS_KEY(struct verbs_conf, manual),
	[VERBS_KEY_COUNT] = { .name = NULL },
};

/* ---- Addresses ---- */

/* Does rdma_cm map sa to port of the adapter named hca? */
static int addr_on_port(struct sockaddr *sa, const char *hca, uint8_t port)
{
	struct rdma_cm_id *id = NULL;
	int match = 0;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) != 0)
		return 0;
	if (rdma_bind_addr(id, sa) == 0 && id->verbs &&
	    strcmp(ibv_get_device_name(id->verbs->device), hca) == 0)
		match = id->port_num == 0 || id->port_num == port;
	rdma_destroy_id(id);
	return match;
}

/* The first address of interface ifname (ifname NULL: of any interface
 * rdma_cm maps to hca's port), IPv4 before IPv6, printed in out. */
static int find_address(const char *ifname, const char *hca, uint8_t port, char *out, size_t len)
{
	struct ifaddrs *ifa = NULL;
	int found = 0;

	if (getifaddrs(&ifa) != 0)
		return 0;
	for (int fam = AF_INET; fam && !found; fam = fam == AF_INET ? AF_INET6 : 0) {
		for (struct ifaddrs *i = ifa; i && !found; i = i->ifa_next) {
			struct sockaddr_storage ss = { 0 };
			size_t sl = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);

			if (!i->ifa_addr || i->ifa_addr->sa_family != fam ||
			    (ifname && strcmp(i->ifa_name, ifname) != 0))
				continue;
			memcpy(&ss, i->ifa_addr, sl);
			if (!ifname && !addr_on_port((struct sockaddr *)&ss, hca, port))
				continue;
			found = inet_ntop(fam, fam == AF_INET
			                  ? (const void *)&((struct sockaddr_in *)&ss)->sin_addr
			                  : (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr,
			                  out, (socklen_t)len) != NULL;
		}
	}
	freeifaddrs(ifa);
	return found;
}

/* ---- Adapters and ports ---- */

/* Port speed in bits/s from the IB speed and width codes; 0 if unknown. */
static uint64_t port_rate(const struct ibv_port_attr *pa)
{
	static const struct { uint8_t code; uint64_t mbps; } speeds[] = {
		{ 1, 2500 }, { 2, 5000 }, { 4, 10000 }, { 8, 10312 }, { 16, 14062 },
		{ 32, 25781 }, { 64, 50000 }, { 128, 100000 },
	};
	static const struct { uint8_t code; uint64_t lanes; } widths[] = {
		{ 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 },
	};
	uint64_t mbps = 0, lanes = 0;

	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].code == pa->active_speed)
			mbps = speeds[i].mbps;
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
		if (widths[i].code == pa->active_width)
			lanes = widths[i].lanes;
	return mbps * lanes * 1000000ull;
}

/*
 * Registered memory must survive the application's fork() (api/cci.h,
 * "Processes"): a child must never take over the parent's pinned pages.
 * From Linux 5.13 the kernel copies pinned pages for the child and this
 * is a no-op; older kernels need the registrations marked MADV_DONTFORK,
 * which ibv_fork_init() makes libibverbs do.  It must precede every other
 * verbs call of the process, hence here, before the first device list.
 */
static void fork_protect(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, verbs_fork_init);
}

/* The list, or NULL with the reason logged once (the caller says the rest). */
static struct ibv_device **device_list(int *n_p)
{
	struct ibv_device **list;
	int err;

	fork_protect();
	errno = 0;
	list = ibv_get_device_list(n_p);
	err = errno;
	if (list && *n_p > 0)
		return list;
	if (list)
		ibv_free_device_list(list);
	VERBS_LOG(CCI_LOG_INIT, "verbs: %s%s%s", VERBS_NO_DEVICE, err ? ": " : "",
	          err == ENOSYS ? "the kernel has no RDMA support (no uverbs devices)"
	          : err ? strerror(err) : "");
	return NULL;
}

static const struct verbs_conf *conf_defaults(struct verbs_conf *c)
{
	*c = (struct verbs_conf){ .mss = VERBS_MSS_DEFAULT, .sq_depth = VERBS_SQ_DEFAULT,
	                          .recv_count = VERBS_RECV_COUNT_DEFAULT };
	return c;
}

/* Fill dev for port of the adapter ctx; the device is up unless why. */
static int dev_publish(cci__dev_t *dev, struct ibv_context *ctx, uint8_t port,
                       const struct ibv_port_attr *pa, const struct verbs_conf *c,
                       const char *ip, const char *why)
{
	struct verbs_dev *d = calloc(1, sizeof(*d));
	const char *name = ibv_get_device_name(ctx->device);

	if (!d)
		return CCI_ENOMEM;
	snprintf(d->hca, sizeof(d->hca), "%s", name);
	d->port = port;
	snprintf(d->ip, sizeof(d->ip), "%s", ip ? ip : "");
	d->mss = c->mss;
	d->sq_depth = c->sq_depth;
	d->recv_count = c->recv_count;
	d->manual = c->manual;
	if (why)
		snprintf(d->info, sizeof(d->info), "RDMA adapter %s port %u: %s", name, port, why);
	else
		snprintf(d->info, sizeof(d->info), "RDMA adapter %s port %u (%s), address %s", name,
		         port, pa->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", ip);
	cci__dev_publish(dev, d, why == NULL, c->mss, why ? 0 : port_rate(pa), d->info);
	return CCI_SUCCESS;
}

/* Discovery: one device per active port with an address, verbs-<hca>-<port>. */
static int discover_adapter(struct ibv_device *ibdev)
{
	struct ibv_context *ctx = ibv_open_device(ibdev);
	struct ibv_device_attr da;
	struct verbs_conf c;
	int rc = CCI_SUCCESS;

	if (!ctx || ibv_query_device(ctx, &da) != 0) {
		VERBS_LOG(CCI_LOG_INIT, "verbs: %s: cannot open or query: %s",
		          ibv_get_device_name(ibdev), strerror(errno));
		if (ctx)
			ibv_close_device(ctx);
		return CCI_SUCCESS;
	}
	for (uint8_t p = 1; p <= da.phys_port_cnt && rc == CCI_SUCCESS; p++) {
		struct ibv_port_attr pa;
		char ip[INET6_ADDRSTRLEN], name[VERBS_NAME_LEN + 16];
		cci__dev_t *dev;

		if (ibv_query_port(ctx, p, &pa) != 0 || pa.state != IBV_PORT_ACTIVE)
			continue;
		snprintf(name, sizeof(name), "verbs-%s-%u", ibv_get_device_name(ibdev), p);
		dev = verbs_core->dev_add(&cci_ctp_verbs_plugin, name);
		if (!dev) {
			rc = CCI_ENOMEM;
			break;
		}
		if (find_address(NULL, ibv_get_device_name(ibdev), p, ip, sizeof(ip)))
			rc = dev_publish(dev, ctx, p, &pa, conf_defaults(&c), ip, NULL);
		else
			rc = dev_publish(dev, ctx, p, &pa, conf_defaults(&c), NULL,
			                 "no IP address maps to this port (rdma_cm needs one)");
		VERBS_LOG(CCI_LOG_INIT, "verbs: device %s: %s", name, dev->pub.info);
	}
	ibv_close_device(ctx);
	return rc;
}

int verbs_discover(void)
{
	int n = 0, rc = CCI_SUCCESS;
	struct ibv_device **list = device_list(&n);

	if (!list) {
		if (verbs_core->size >= offsetof(struct cci_core, plugin_note) + sizeof(void *) &&
		    verbs_core->plugin_note)
			verbs_core->plugin_note(&cci_ctp_verbs_plugin, VERBS_NO_DEVICE);
		return CCI_SUCCESS;
	}
	for (int i = 0; i < n && rc == CCI_SUCCESS; i++)
		rc = discover_adapter(list[i]);
	ibv_free_device_list(list);
	return rc;
}

/* ---- A config section ---- */

/* The adapter the section names (or the first), opened; NULL after conf_error. */
static struct ibv_context *conf_adapter(cci__dev_t *dev, const struct verbs_conf *c,
                                        const int *kv)
{
	const char *want = c->device[0] ? c->device : c->hca[0] ? c->hca : NULL;
	int n = 0, key = c->device[0] ? VERBS_KEY_DEVICE : VERBS_KEY_HCA;
	struct ibv_device **list = device_list(&n);
	struct ibv_context *ctx = NULL;

	if (!list) {
		verbs_core->conf_error(dev, -1, "%s", VERBS_NO_DEVICE);
		return NULL;
	}
	for (int i = 0; i < n && !ctx; i++)
		if (!want || strcmp(ibv_get_device_name(list[i]), want) == 0)
			ctx = ibv_open_device(list[i]);
	if (!ctx && want)
		verbs_core->conf_error(dev, kv[key], "\"%s\" is not an RDMA adapter of this host "
		                       "(first found: %s)", want, ibv_get_device_name(list[0]));
	else if (!ctx)
		verbs_core->conf_error(dev, -1, "cannot open RDMA adapter %s: %s",
		                       ibv_get_device_name(list[0]), strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

/* The port of the section (or the first active one) into *port_p, its
 * attributes into pa; NULL or why it cannot serve. */
static const char *conf_port(struct ibv_context *ctx, const struct verbs_conf *c,
                             uint8_t *port_p, struct ibv_port_attr *pa)
{
	struct ibv_device_attr da;

	if (ibv_query_device(ctx, &da) != 0)
		return "the adapter cannot be queried";
	for (uint32_t p = c->port ? c->port : 1; p <= da.phys_port_cnt; p++) {
		*port_p = (uint8_t)p;
		if (ibv_query_port(ctx, (uint8_t)p, pa) == 0 && pa->state == IBV_PORT_ACTIVE)
			return NULL;
		if (c->port)
			return "the port is not active";
	}
	return c->port ? "the adapter has no such port" : "no port of the adapter is active";
}

/* The address endpoints bind to, into ip; CCI_EINVAL after conf_error. */
static int conf_address(cci__dev_t *dev, const struct verbs_conf *c, const int *kv,
                        struct ibv_context *ctx, uint8_t port, char *ip, size_t len)
{
	if (c->ip[0] && c->interface[0]) {
		verbs_core->conf_error(dev, kv[VERBS_KEY_INTERFACE], "give ip= or interface=, not both");
		return CCI_EINVAL;
	}
	if (c->ip[0]) {
		snprintf(ip, len, "%s", c->ip);
		return CCI_SUCCESS;
	}
	if (c->interface[0] && !find_address(c->interface, NULL, 0, ip, len)) {
		verbs_core->conf_error(dev, kv[VERBS_KEY_INTERFACE],
		                       "\"%s\" has no IP address on this host", c->interface);
		return CCI_EINVAL;
	}
	if (!c->interface[0] && !find_address(NULL, ibv_get_device_name(ctx->device), port, ip, len))
		ip[0] = '\0';
	return CCI_SUCCESS;
}

int verbs_dev_configure(cci__dev_t *dev)
{
	struct verbs_conf c;
	int kv[VERBS_KEY_COUNT], rc;
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	char ip[INET6_ADDRSTRLEN] = "";
	const char *why;
	uint8_t port = 1;

	conf_defaults(&c);
	rc = verbs_core->conf_parse(dev, verbs_conf_keys, &c, kv);
	if (rc != CCI_SUCCESS)
		return rc;
	if (c.device[0] && c.hca[0]) {
		verbs_core->conf_error(dev, kv[VERBS_KEY_HCA], "give device= or hca=, not both");
		return CCI_EINVAL;
	}
	ctx = conf_adapter(dev, &c, kv);
	if (!ctx)
		return CCI_EINVAL;
	why = conf_port(ctx, &c, &port, &pa);
	rc = conf_address(dev, &c, kv, ctx, port, ip, sizeof(ip));
	if (rc == CCI_SUCCESS && !why && !ip[0])
		why = "no IP address maps to this port (set ip= or interface=)";
	if (rc == CCI_SUCCESS)
		rc = dev_publish(dev, ctx, port, &pa, &c, ip, why);
	if (rc == CCI_SUCCESS && why)
		VERBS_WARN("verbs: device [%s]: %s; the device is down", dev->pub.name, dev->pub.info);
	ibv_close_device(ctx);
	return rc;
}

void verbs_dev_free(cci__dev_t *dev)
{
	free(dev->priv);
	dev->priv = NULL;
}
