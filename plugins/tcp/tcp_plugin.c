/*
 * tcp_plugin.c - the tcp transport: its ops table, its devices and the
 * ini keys of a tcp section.
 */
#include "plugin.h"
#include "tcp.h"

const struct cci_core *tcp_core;

extern const struct cci_plugin cci_ctp_tcp_plugin;

/* The ini keys of a tcp section, as plugins/tcp/README.md lists them. */
static const struct cci_conf_key tcp_conf_keys[] = NET_CONF_KEYS(
	TCP_AM_MSS_MIN, TCP_AM_MSS_MAX, TCP_AM_MSS_DEFAULT, TCP_BUFSIZE_MAX,
	"bind the first address of this interface (IPv4 first; with ip, the "
	"family of ip); an interface without an address makes the device down",
	"port of endpoints created without a service; 0 picks a free one",
	"SO_SNDBUF and SO_RCVBUF of every socket, in bytes; 0 leaves the "
	"kernel's autotuning");

static int tcp_init(const struct cci_core *core)
{
	return cci__plugin_take_core(core, &tcp_core);
}

static const struct net_transport tcp_transport = {
	.name = "tcp", .proto = "TCP/IP", .mss = TCP_AM_MSS_DEFAULT,
	.plugin = &cci_ctp_tcp_plugin, .keys = tcp_conf_keys,
};

static int tcp_discover_devs(void)
{
	return net_devs_discover(tcp_core, &tcp_transport);
}

static int tcp_dev_configure_one(cci__dev_t *dev)
{
	return net_devs_configure(tcp_core, &tcp_transport, dev);
}

static const char *const tcp_transports[] = { "tcp", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_tcp_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "tcp",
	.transports = tcp_transports,
	.priority = 30,
	.ep_priv_size = sizeof(struct tcp_ep),
	.conn_priv_size = sizeof(struct tcp_conn),
	.init = tcp_init,
	.discover = tcp_discover_devs,
	.dev_configure = tcp_dev_configure_one,
	.dev_free = cci__dev_free_priv,
	.ep_create = tcp_ep_create,
	.ep_stop = tcp_ep_stop,
	.ep_free = tcp_ep_free,
	.progress = tcp_progress,
	.arm = tcp_arm,
	.ep_set_buf_count = tcp_ep_set_buf_count,
	.conn_timeouts_changed = tcp_conn_timeouts_changed,
	.connect = tcp_connect,
	.accept = tcp_accept,
	.reject = tcp_reject,
	.request_done = tcp_request_done,
	.disconnect = tcp_disconnect,
	.send = tcp_send,
	.rma = tcp_rma,
	.recv_returned = tcp_recv_returned,
	.conf_keys = tcp_conf_keys,
};
