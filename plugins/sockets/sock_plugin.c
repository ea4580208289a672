/*
 * sock_plugin.c - the sockets plugin: its ops table, its devices and the
 * ini keys of a tcp section.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spin.h"
#include "tcp.h"

const struct cci_core *tcp_core;

extern const struct cci_plugin cci_ctp_sockets_plugin;

static const char *const progress_modes[] = { "auto", "manual", NULL };

/* The ini keys of a tcp section, as plugins/sockets/README.md lists them. */
static const struct cci_conf_key tcp_conf_keys[] = {
	[SOCK_KEY_IP] = {
		.name = "ip", .type = CCI_CONF_CUSTOM, .check = sock_conf_ip,
		.offset = offsetof(struct sock_dev, addr), .size = sizeof(struct sockaddr_storage),
		.help = "numeric IPv4 or IPv6 address to bind and advertise (default: all IPv4 "
		        "addresses; the URI shows the first non-loopback one, else 127.0.0.1)" },
	[SOCK_KEY_INTERFACE] = {
		.name = "interface", .type = CCI_CONF_STRING,
		.offset = offsetof(struct sock_dev, ifname), .size = IF_NAMESIZE,
		.help = "bind the first address of this interface (IPv4 first; with ip, the "
		        "family of ip); an interface without an address makes the device down" },
	[SOCK_KEY_PORT] = {
		.name = "port", .type = CCI_CONF_UINT, .min = 0, .max = 65535, .def = "0",
		.offset = offsetof(struct sock_dev, port), .size = sizeof(uint16_t),
		.help = "port of endpoints created without a service; 0 picks a free one" },
	[SOCK_KEY_MSS] = {
		.name = "mss", .type = CCI_CONF_UINT, .min = TCP_AM_MSS_MIN, .max = TCP_AM_MSS_MAX,
		.def = CCI_CONF_NUM(TCP_AM_MSS_DEFAULT),
		.offset = offsetof(struct sock_dev, mss), .size = sizeof(uint32_t),
		.help = "largest message, in bytes" },
	[SOCK_KEY_BUFSIZE] = {
		.name = "bufsize", .type = CCI_CONF_UINT, .min = 0, .max = TCP_BUFSIZE_MAX,
		.def = "0", .offset = offsetof(struct sock_dev, bufsize), .size = sizeof(uint32_t),
		.help = "SO_SNDBUF and SO_RCVBUF of every socket, in bytes; 0 leaves the "
		        "kernel's autotuning" },
	[SOCK_KEY_PROGRESS] = {
		.name = "progress", .type = CCI_CONF_CHOICE, .choices = progress_modes,
		.def = "auto", .offset = offsetof(struct sock_dev, manual_progress),
		.size = sizeof(int),
		.help = "auto: a progress thread per endpoint; manual: none, only the "
		        "application's calls move the endpoint" },
	[SOCK_KEY_COUNT] = { .name = NULL },
};

static int sock_init(const struct cci_core *core)
{
	if (!core || core->size < sizeof(struct cci_core))
		return CCI_EINVAL;
	tcp_core = core;
	return CCI_SUCCESS;
}

static const struct sock_transport tcp_transport = {
	.name = "tcp", .proto = "TCP/IP", .mss = TCP_AM_MSS_DEFAULT,
	.plugin = &cci_ctp_sockets_plugin, .keys = tcp_conf_keys,
};

static int sock_discover_devs(void)
{
	return sock_devs_discover(tcp_core, &tcp_transport);
}

static int sock_dev_configure_one(cci__dev_t *dev)
{
	return sock_devs_configure(tcp_core, &tcp_transport, dev);
}

static const char *const sock_transports[] = { "tcp", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_sockets_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "sockets",
	.transports = sock_transports,
	.priority = 30,
	.ep_priv_size = sizeof(struct tcp_ep),
	.conn_priv_size = sizeof(struct tcp_conn),
	.init = sock_init,
	.discover = sock_discover_devs,
	.dev_configure = sock_dev_configure_one,
	.dev_free = sock_devs_free,
	.ep_create = tcp_ep_create,
	.ep_destroy = tcp_ep_destroy,
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
