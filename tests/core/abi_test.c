/*
 * abi_test.c - the numeric values and layouts of api/cci.h that CCI 2
 * programs and language bindings depend on.  Compiled as C and as C++
 * (abi_test.cpp includes this file), so the header's C++ guard is proved too.
 * Everything is checked at compile time; the program only reports.
 */
#include <stddef.h>
#include <stdio.h>

#include "cci.h"

#ifdef __cplusplus
#define STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

STATIC_ASSERT(CCI_ABI_VERSION == 2, "ABI version");

STATIC_ASSERT(CCI_SUCCESS == 0 && CCI_ERROR == 1 && CCI_ERR_DISCONNECTED == 2 &&
              CCI_ERR_RNR == 3 && CCI_ERR_DEVICE_DEAD == 4 && CCI_ERR_RMA_HANDLE == 5 &&
              CCI_ERR_RMA_OP == 6 && CCI_ERR_NOT_IMPLEMENTED == 7 && CCI_ERR_NOT_FOUND == 8,
              "CCI status values");
STATIC_ASSERT(CCI_EINVAL == 22 && CCI_ETIMEDOUT == 110 && CCI_ENOMEM == 12 &&
              CCI_ENODEV == 19 && CCI_ENETDOWN == 100 && CCI_EBUSY == 16 && CCI_ERANGE == 34 &&
              CCI_EAGAIN == 11 && CCI_ENOBUFS == 105 && CCI_EMSGSIZE == 90 &&
              CCI_ENOMSG == 42 && CCI_EADDRNOTAVAIL == 99 && CCI_ECONNREFUSED == 111,
              "errno-valued status values");
STATIC_ASSERT(CCI_CONN_ATTR_RO == 0 && CCI_CONN_ATTR_RU == 1 && CCI_CONN_ATTR_UU == 2 &&
              CCI_CONN_ATTR_UU_MC_TX == 3 && CCI_CONN_ATTR_UU_MC_RX == 4, "attributes");
STATIC_ASSERT(CCI_EVENT_NONE == 0 && CCI_EVENT_SEND == 1 && CCI_EVENT_RECV == 2 &&
              CCI_EVENT_CONNECT == 3 && CCI_EVENT_CONNECT_REQUEST == 4 &&
              CCI_EVENT_ACCEPT == 5 && CCI_EVENT_KEEPALIVE_TIMEDOUT == 6 &&
              CCI_EVENT_ENDPOINT_DEVICE_FAILED == 7, "event types");
STATIC_ASSERT(CCI_OPT_ENDPT_SEND_TIMEOUT == 0 && CCI_OPT_ENDPT_RECV_BUF_COUNT == 1 &&
              CCI_OPT_ENDPT_SEND_BUF_COUNT == 2 && CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT == 3 &&
              CCI_OPT_ENDPT_URI == 4 && CCI_OPT_ENDPT_RMA_ALIGN == 5 &&
              CCI_OPT_CONN_SEND_TIMEOUT == 6 && CCI_OPT_CONN_KEEPALIVE_TIMEOUT == 7,
              "option names");
STATIC_ASSERT(CCI_FLAG_BLOCKING == 1 && CCI_FLAG_NO_COPY == 2 && CCI_FLAG_SILENT == 8 &&
              CCI_FLAG_READ == 16 && CCI_FLAG_WRITE == 32 && CCI_FLAG_FENCE == 64, "flags");
STATIC_ASSERT(CCI_CONN_REQ_LEN == 1024, "connect payload limit");

/* Layouts that bindings read by offset (LP64). */
STATIC_ASSERT(offsetof(struct cci_device, name) == 0 &&
              offsetof(struct cci_device, transport) == 8 &&
              offsetof(struct cci_device, up) == 16 &&
              offsetof(struct cci_device, info) == 24 &&
              offsetof(struct cci_device, conf_argv) == 32 &&
              offsetof(struct cci_device, max_send_size) == 40 &&
              offsetof(struct cci_device, rate) == 48 &&
              offsetof(struct cci_device, pci) == 56 && sizeof(struct cci_device) == 72,
              "struct cci_device layout");
STATIC_ASSERT(offsetof(struct cci_connection, max_send_size) == 0 &&
              offsetof(struct cci_connection, endpoint) == 8 &&
              offsetof(struct cci_connection, attribute) == 16 &&
              offsetof(struct cci_connection, context) == 24, "struct cci_connection layout");
STATIC_ASSERT(sizeof(struct cci_rma_handle) == 32, "RMA handle is 32 bytes");
STATIC_ASSERT(sizeof(cci_alignment_t) == 24, "alignment struct");
STATIC_ASSERT(offsetof(struct cci_event_recv, len) == 4 &&
              offsetof(struct cci_event_recv, ptr) == 8 &&
              offsetof(struct cci_event_recv, connection) == 16, "recv event layout");
STATIC_ASSERT(offsetof(struct cci_event_send, status) == 4 &&
              offsetof(struct cci_event_send, connection) == 8 &&
              offsetof(struct cci_event_send, context) == 16, "send event layout");
STATIC_ASSERT(offsetof(struct cci_event_connect_request, data_len) == 4 &&
              offsetof(struct cci_event_connect_request, data_ptr) == 8 &&
              offsetof(struct cci_event_connect_request, attribute) == 16,
              "request event layout");

/* The header alone brings what CCI 2's did: errno names (CCI 2 programs
 * use EINTR and ENOMEM with only cci.h), NULL and the sys/types.h types. */
STATIC_ASSERT(EINTR == 4 && ENOMEM == 12 && EAGAIN == 11, "errno names from cci.h");
STATIC_ASSERT(CCI_EINVAL == EINVAL && CCI_ETIMEDOUT == ETIMEDOUT && CCI_EAGAIN == EAGAIN &&
              CCI_ENOBUFS == ENOBUFS && CCI_ECONNREFUSED == ECONNREFUSED,
              "errno-valued statuses equal errno.h's");
STATIC_ASSERT(sizeof(pid_t) > 0 && sizeof(ssize_t) == sizeof(size_t), "sys/types.h types");

/* CCI 2's names for the event structs, with their layouts. */
STATIC_ASSERT(sizeof(cci_event_send_t) == sizeof(struct cci_event_send) &&
              offsetof(cci_event_send_t, status) == 4 &&
              offsetof(cci_event_send_t, connection) == 8 &&
              offsetof(cci_event_send_t, context) == 16, "cci_event_send_t");
STATIC_ASSERT(offsetof(cci_event_recv_t, len) == 4 && offsetof(cci_event_recv_t, ptr) == 8 &&
              offsetof(cci_event_recv_t, connection) == 16, "cci_event_recv_t");
STATIC_ASSERT(offsetof(cci_event_connect_t, status) == 4 &&
              offsetof(cci_event_connect_t, context) == 8 &&
              offsetof(cci_event_connect_t, connection) == 16, "cci_event_connect_t");
STATIC_ASSERT(offsetof(cci_event_connect_request_t, data_len) == 4 &&
              offsetof(cci_event_connect_request_t, data_ptr) == 8 &&
              offsetof(cci_event_connect_request_t, attribute) == 16,
              "cci_event_connect_request_t");
STATIC_ASSERT(offsetof(cci_event_accept_t, status) == 4 &&
              offsetof(cci_event_accept_t, context) == 8 &&
              offsetof(cci_event_accept_t, connection) == 16, "cci_event_accept_t");
STATIC_ASSERT(offsetof(cci_event_keepalive_timedout_t, connection) == 8,
              "cci_event_keepalive_timedout_t");
STATIC_ASSERT(offsetof(cci_event_endpoint_device_failed_t, endpoint) == 8,
              "cci_event_endpoint_device_failed_t");
STATIC_ASSERT(sizeof(cci_event_t) == 24, "the event union");

/* The other public names a CCI 2 program may use. */
STATIC_ASSERT(CCI_EP_ROUTING == 1 && sizeof(cci_endpoint_flags_t) == sizeof(int),
              "endpoint flags");
STATIC_ASSERT(sizeof(cci_os_handle_t) == sizeof(int) && sizeof(cci_opt_name_t) == sizeof(int) &&
              sizeof(cci_conn_attribute_t) == sizeof(int) &&
              sizeof(cci_event_type_t) == sizeof(int) && sizeof(cci_status_t) == sizeof(int),
              "enum and handle types");

/* Function types exactly as CCI 2 declared them; a mismatch fails to compile. */
static int (*init_fn)(uint32_t, uint32_t, uint32_t *) = cci_init;
static int (*devices_fn)(cci_device_t *const **) = cci_get_devices;
static int (*ep_fn)(cci_device_t *, int, cci_endpoint_t **, cci_os_handle_t *) =
	cci_create_endpoint;
static int (*ep_at_fn)(cci_device_t *, const char *, int, cci_endpoint_t **,
                             cci_os_handle_t *) = cci_create_endpoint_at;
static const char *(*strerror_fn)(cci_endpoint_t *, enum cci_status) = cci_strerror;
static int (*accept_fn)(cci_event_t *, const void *) = cci_accept;
static int (*connect_fn)(cci_endpoint_t *, const char *, const void *, uint32_t,
                               cci_conn_attribute_t, const void *, int,
                               const struct timeval *) = cci_connect;
static int (*opt_fn)(cci_opt_handle_t *, cci_opt_name_t, const void *) = cci_set_opt;
static int (*event_fn)(cci_endpoint_t *, cci_event_t **) = cci_get_event;
static int (*sendv_fn)(cci_connection_t *, const struct iovec *, uint32_t, const void *,
                             int) = cci_sendv;
static int (*reg_fn)(cci_endpoint_t *, void *, uint64_t, int, cci_rma_handle_t **) =
	cci_rma_register;
static int (*rma_fn)(cci_connection_t *, const void *, uint32_t, cci_rma_handle_t *,
                           uint64_t, cci_rma_handle_t *, uint64_t, uint64_t, const void *,
                           int) = cci_rma;

/* The plugin-info extension: additive, with its own names and values. */
#ifndef CCI_EXT_PLUGIN_INFO
#error "cci.h does not announce the plugin-info extension"
#endif
STATIC_ASSERT(CCI_PLUGIN_LOADED == 0 && CCI_PLUGIN_SKIPPED == 1, "plugin status values");
STATIC_ASSERT(offsetof(struct cci_plugin_info, name) == 0 &&
              offsetof(struct cci_plugin_info, path) == 8 &&
              offsetof(struct cci_plugin_info, status) == 16 &&
              offsetof(struct cci_plugin_info, reason) == 24 &&
              offsetof(struct cci_plugin_info, transports) == 32 &&
              offsetof(struct cci_plugin_info, note) == 40 &&
              sizeof(cci_plugin_info_t) == 48, "struct cci_plugin_info layout");
static int (*plugins_fn)(cci_plugin_info_t *const **) = cci_get_plugins;
static int (*plugin_dirs_fn)(const char *const **) = cci_get_plugin_dirs;
static int (*device_priority_fn)(cci_device_t *, int *, int *) = cci_get_device_priority;

#ifndef CCI_EXT_PLUGIN_KEYS
#error "cci.h does not announce cci_get_plugin_keys"
#endif
STATIC_ASSERT(CCI_CONF_UINT == 1 && CCI_CONF_STRING == 2 && CCI_CONF_CHOICE == 3 &&
              CCI_CONF_CUSTOM == 4, "config key types");
STATIC_ASSERT(offsetof(struct cci_conf_key_info, name) == 0 &&
              offsetof(struct cci_conf_key_info, type) == 8 &&
              offsetof(struct cci_conf_key_info, min) == 16 &&
              offsetof(struct cci_conf_key_info, max) == 24 &&
              offsetof(struct cci_conf_key_info, choices) == 32 &&
              offsetof(struct cci_conf_key_info, def) == 40 &&
              offsetof(struct cci_conf_key_info, help) == 48 &&
              sizeof(cci_conf_key_info_t) == 56, "struct cci_conf_key_info layout");
static int (*plugin_keys_fn)(cci_plugin_info_t *, cci_conf_key_info_t *const **) =
	cci_get_plugin_keys;

int main(void)
{
	/* The inline helper is part of the header's contract too. */
	int declared = init_fn && devices_fn && ep_fn && ep_at_fn && strerror_fn && accept_fn &&
	               connect_fn && opt_fn && event_fn && sendv_fn && reg_fn && rma_fn &&
	               plugins_fn && plugin_dirs_fn && device_priority_fn && plugin_keys_fn;

	if (cci_event_type_str(CCI_EVENT_RECV)[0] == '\0' || !declared)
		return 1;
	printf("1 passed, 0 failed\n");
	return 0;
}
