/*
 * sock_plugin.c - the sock transport (UDP, sock://host:port): its ops
 * table, its devices and the ini keys of a sock section.  The address,
 * device and key code it shares with tcp is plugins/common/net_dev.c.
 */
#include "plugin.h"
#include "sock.h"

const struct cci_core *sock_core;

extern const struct cci_plugin cci_ctp_sock_plugin;

/* The ini keys of a sock section, as plugins/sock/README.md lists them:
 * tcp's keys, with the limits of this transport. */
static const struct cci_conf_key sock_conf_keys[] = NET_CONF_KEYS(
	SOCK_MSS_MIN, SOCK_MSS_MAX, SOCK_MSS_DEFAULT, SOCK_BUFSIZE_MAX,
	"bind the first address of this interface (IPv4 first; with ip, the "
	"family of ip); its MTU sizes the datagrams",
	"UDP port of endpoints created without a service; 0 picks a free one",
	"SO_SNDBUF and SO_RCVBUF of the socket, in bytes; 0 asks for 4 MiB "
	"(the kernel caps it at net.core.rmem_max/wmem_max)");

static int plugin_init(const struct cci_core *core)
{
	return cci__plugin_take_core(core, &sock_core);
}

static const struct net_transport udp_transport = {
	.name = "sock", .proto = "UDP", .mss = SOCK_MSS_DEFAULT,
	.plugin = &cci_ctp_sock_plugin, .keys = sock_conf_keys,
};

static int discover_devs(void)
{
	return net_devs_discover(sock_core, &udp_transport);
}

static int dev_configure(cci__dev_t *dev)
{
	return net_devs_configure(sock_core, &udp_transport, dev);
}

static const char *const transports[] = { "sock", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_sock_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "sock",
	.transports = transports,
	.priority = 20,
	.ep_priv_size = sizeof(struct sock_ep),
	.conn_priv_size = sizeof(struct sock_conn),
	.init = plugin_init,
	.discover = discover_devs,
	.dev_configure = dev_configure,
	.dev_free = cci__dev_free_priv,
	.ep_create = sock_ep_create,
	.ep_stop = sock_ep_stop,
	.ep_free = sock_ep_free,
	.progress = sock_progress,
	.arm = sock_arm,
	.ep_set_buf_count = sock_ep_set_buf_count,
	.conn_timeouts_changed = sock_conn_timeouts_changed,
	.connect = sock_connect,
	.accept = sock_accept,
	.reject = sock_reject,
	.request_done = sock_request_done,
	.disconnect = sock_disconnect,
	.send = sock_tx_send,
	.rma = sock_rma,
	.recv_returned = sock_recv_returned,
	.conf_keys = sock_conf_keys,
};
