/*
 * t_hostile.c - connection requests an endpoint must refuse, sent by a
 * bare libfabric endpoint of the same provider: a REQ addressed to a
 * connection, one granting no credits, one with an mss over the limit,
 * one with flags nobody knows, one whose payload length lies.  None may
 * become a CONNECT_REQUEST; a well-formed REQ sent the same way after them
 * does (so the path was open), and the endpoint still connects.  The
 * messages are written and read by the transport's own codec
 * (plugins/ofi/ofi_wire.h, network byte order).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "ofi_test.h"
#include "ofi_wire.h"

#define WAIT_MS 5000
#define RX_BUFS 4

/* A bare RDM endpoint, the sender of the hostile messages. */
struct raw {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t server;
	uint8_t addr[OFI_ADDR_MAX];
	size_t addr_len;
	struct fi_context2 rx_ctx[RX_BUFS], tx_ctx;
	uint64_t rx_buf[RX_BUFS][512];
};

static void raw_close(struct raw *r)
{
	if (r->ep)
		fi_close(&r->ep->fid);
	if (r->av)
		fi_close(&r->av->fid);
	if (r->cq)
		fi_close(&r->cq->fid);
	if (r->domain)
		fi_close(&r->domain->fid);
	if (r->fabric)
		fi_close(&r->fabric->fid);
	if (r->info)
		fi_freeinfo(r->info);
}

/* The server's provider address from its URI "ofi://<provider>/<text>",
 * as ofi_addr.c reads it: "<ipv4>:<port>" is a sockaddr_in (tcp), other
 * text is the address itself with its NUL (FI_ADDR_STR, shm).  The
 * address format, or -1. */
static int uri_address(const char *uri, void *addr, size_t *len)
{
	const char *a = strchr(uri + strlen("ofi://"), '/');
	const char *colon;
	char ip[64];

	if (!a || strlen(++a) + 1 > OFI_ADDR_MAX)
		return -1;
	colon = strrchr(a, ':');
	if (colon && (size_t)(colon - a) < sizeof(ip)) {
		struct sockaddr_in sin = { .sin_family = AF_INET };
		memcpy(ip, a, (size_t)(colon - a));
		ip[colon - a] = '\0';
		sin.sin_port = htons((uint16_t)atoi(colon + 1));
		if (inet_pton(AF_INET, ip, &sin.sin_addr) == 1) {
			memcpy(addr, &sin, sizeof(sin));
			*len = sizeof(sin);
			return FI_SOCKADDR_IN;
		}
	}
	*len = strlen(a) + 1;
	memcpy(addr, a, *len);
	return FI_ADDR_STR;
}

static int raw_open(struct raw *r, const void *server, int format)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 64 };
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (!hints || !(hints->fabric_attr->prov_name = strdup(ot_provider)))
		goto out;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->addr_format = (uint32_t)format;
	if (fi_getinfo(FI_VERSION(1, 17), format == FI_SOCKADDR_IN ? "127.0.0.1" : NULL, NULL, 0,
	               hints, &r->info) != 0 ||
	    fi_fabric(r->info->fabric_attr, &r->fabric, NULL) != 0 ||
	    fi_domain(r->fabric, r->info, &r->domain, NULL) != 0 ||
	    fi_av_open(r->domain, &av_attr, &r->av, NULL) != 0 ||
	    fi_cq_open(r->domain, &cq_attr, &r->cq, NULL) != 0 ||
	    fi_endpoint(r->domain, r->info, &r->ep, NULL) != 0 ||
	    fi_ep_bind(r->ep, &r->av->fid, 0) != 0 ||
	    fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV) != 0 || fi_enable(r->ep) != 0)
		goto out;
	r->addr_len = sizeof(r->addr);
	if (fi_getname(&r->ep->fid, r->addr, &r->addr_len) != 0 ||
	    fi_av_insert(r->av, server, 1, &r->server, 0, NULL) != 1)
		goto out;
	/* Room for the server's answers (REJECT), so that nothing waits on us. */
	for (int i = 0; i < RX_BUFS; i++)
		if (fi_recv(r->ep, r->rx_buf[i], sizeof(r->rx_buf[i]), NULL, FI_ADDR_UNSPEC,
		            &r->rx_ctx[i]) != 0)
			goto out;
	rc = 0;
out:
	if (hints)
		fi_freeinfo(hints);
	return rc;
}

/* Post the receive buffer of ctx again, if ctx is one. */
static void raw_repost(struct raw *r, void *ctx)
{
	for (int j = 0; j < RX_BUFS; j++)
		if (ctx == &r->rx_ctx[j])
			fi_recv(r->ep, r->rx_buf[j], sizeof(r->rx_buf[j]), NULL, FI_ADDR_UNSPEC,
			        &r->rx_ctx[j]);
}

/* Drive the raw endpoint's progress once. */
static void raw_poll(struct raw *r)
{
	struct fi_cq_entry e[8];
	ssize_t n = fi_cq_read(r->cq, e, 8);

	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		fi_cq_readerr(r->cq, &err, 0);
		return;
	}
	for (ssize_t i = 0; i < n; i++)
		raw_repost(r, e[i].op_context);
}

/* Send len bytes to the server and wait for the send's completion. */
static int raw_send(struct raw *r, const void *buf, size_t len)
{
	uint64_t stop = ot_now_ms() + WAIT_MS;
	ssize_t rc;

	while ((rc = fi_send(r->ep, buf, len, NULL, r->server, &r->tx_ctx)) == -FI_EAGAIN &&
	       ot_now_ms() < stop)
		raw_poll(r);
	if (rc != 0)
		return -1;
	while (ot_now_ms() < stop) {
		struct fi_cq_entry e;
		ssize_t n = fi_cq_read(r->cq, &e, 1);
		if (n == 1 && e.op_context == &r->tx_ctx)
			return 0;
		if (n == 1)
			raw_repost(r, e.op_context);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(r->cq, &err, 0);
			return -1;
		}
	}
	return -1;
}

/* A REQ as ofi_hs.c lays it out, from hello h and the raw endpoint's
 * address, with payload data; the bytes in buf. */
static size_t req_build(uint64_t *buf, const struct raw *r, uint32_t dst, struct ofi_hello h,
                        const char *data)
{
	struct ofi_hdr hdr = { .dst = dst, .type = OFI_T_REQ };
	char *p = (char *)buf;

	h.addr_len = (uint32_t)r->addr_len;
	if (h.core.data_len == 0)
		h.core.data_len = (uint32_t)strlen(data);
	ofi_hdr_encode(&hdr, p);
	ofi_hello_encode(&h, p + OFI_HDR_LEN);
	memcpy(p + OFI_HDR_LEN + OFI_HELLO_LEN, r->addr, r->addr_len);
	memcpy(p + OFI_HDR_LEN + OFI_HELLO_LEN + r->addr_len, data, strlen(data));
	return OFI_HDR_LEN + OFI_HELLO_LEN + r->addr_len + strlen(data);
}

static struct ofi_hello hello_good(void)
{
	struct ofi_hello h;

	memset(&h, 0, sizeof(h));
	h.id = 0x00010001;
	h.core = (struct cci__hello){ .attr = CCI_CONN_ATTR_RO, .mss = 65536, .credits = 8,
	                              .nonce = 0x5eed };
	return h;
}

/* The next CONNECT_REQUEST of ep within ms, polling the raw endpoint too. */
static cci_event_t *wait_request(cci_endpoint_t *ep, struct raw *r, unsigned ms)
{
	uint64_t stop = ot_now_ms() + ms;

	while (ot_now_ms() < stop) {
		cci_event_t *ev;
		raw_poll(r);
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			return ev;
		cci_return_event(ev);
	}
	return NULL;
}

static void hostile_requests_refused(void)
{
	cci_device_t *dev = ot_init();
	cci_endpoint_t *server = dev ? ot_endpoint(dev) : NULL, *client;
	cci_connection_t *ca = NULL, *cb = NULL;
	uint8_t addr[OFI_ADDR_MAX];
	size_t addr_len;
	int format;
	struct ofi_hello h;
	uint64_t buf[(OFI_HDR_LEN + OFI_HELLO_LEN + OFI_ADDR_MAX + 64) / 8];
	cci_event_t *ev;
	char *uri = NULL;
	struct raw r;
	size_t n;

	CU_ASSERT_FATAL(server != NULL);
	CU_ASSERT_FATAL(cci_get_opt(server, CCI_OPT_ENDPT_URI, &uri) == CCI_SUCCESS);
	format = uri_address(uri, addr, &addr_len);
	free(uri);
	CU_ASSERT_FATAL(format >= 0);
	if (raw_open(&r, addr, format) != 0) {
		ot_skip("no bare RDM endpoint of the provider for the server's address format");
		raw_close(&r);
		ot_fini(server);
		return;
	}
	n = req_build(buf, &r, 7, hello_good(), "bad-dst");
	CU_ASSERT_EQUAL(raw_send(&r, buf, n), 0);
	h = hello_good();
	h.core.credits = 0;
	n = req_build(buf, &r, 0, h, "bad-credits");
	CU_ASSERT_EQUAL(raw_send(&r, buf, n), 0);
	h = hello_good();
	h.core.mss = OFI_MSS_MAX + 1;
	n = req_build(buf, &r, 0, h, "bad-mss");
	CU_ASSERT_EQUAL(raw_send(&r, buf, n), 0);
	h = hello_good();
	h.flags = 0x80;
	n = req_build(buf, &r, 0, h, "bad-flags");
	CU_ASSERT_EQUAL(raw_send(&r, buf, n), 0);
	h = hello_good();
	h.core.data_len = 40; /* 8 bytes follow */
	n = req_build(buf, &r, 0, h, "bad-len!");
	CU_ASSERT_EQUAL(raw_send(&r, buf, n), 0);
	/* The good one last: its request must be the first and only one. */
	n = req_build(buf, &r, 0, hello_good(), "good");
	CU_ASSERT_EQUAL(raw_send(&r, buf, n), 0);
	ev = wait_request(server, &r, WAIT_MS);
	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_EQUAL(ev->request.data_len, 4);
	CU_ASSERT_EQUAL(memcmp(ev->request.data_ptr, "good", 4), 0);
	CU_ASSERT_EQUAL(cci_reject(ev), CCI_SUCCESS);
	cci_return_event(ev);
	CU_ASSERT_PTR_NULL(wait_request(server, &r, 300));
	raw_close(&r);
	/* The endpoint still serves a real client. */
	client = ot_endpoint(dev);
	CU_ASSERT_FATAL(client != NULL);
	CU_ASSERT_EQUAL(ot_pair(client, server, &ca, &cb), 0);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(client), CCI_SUCCESS);
	ot_fini(server);
}

/* The id in the next ACCEPT the raw endpoint receives within WAIT_MS:
 * the server's id of the connection; 0 if none came. */
static uint32_t raw_accept_id(struct raw *r)
{
	uint64_t stop = ot_now_ms() + WAIT_MS;

	while (ot_now_ms() < stop) {
		struct fi_cq_entry e;
		struct ofi_msg m;
		if (fi_cq_read(r->cq, &e, 1) != 1) {
			raw_poll(r); /* reads the error entry, if that was it */
			continue;
		}
		for (int j = 0; j < RX_BUFS; j++) {
			if (e.op_context != &r->rx_ctx[j])
				continue;
			/* An ACCEPT is a header and a hello exactly: decoded
			 * as such, any other message is refused. */
			int ok = ofi_wire_decode(r->rx_buf[j], OFI_HDR_LEN + OFI_HELLO_LEN, &m, NULL) ==
			                 CCI_SUCCESS && m.hdr.type == OFI_T_ACCEPT;
			uint32_t id = ok ? m.u.hello.id : 0;

			raw_repost(r, e.op_context);
			if (ok)
				return id;
		}
	}
	return 0;
}

/* One endpoint life: a raw client asks, the endpoint accepts; the id the
 * endpoint gave the connection, 0 on failure (-1 u32: no raw endpoint). */
static uint32_t first_conn_id(cci_device_t *dev)
{
	cci_endpoint_t *server = ot_endpoint(dev);
	uint64_t buf[(OFI_HDR_LEN + OFI_HELLO_LEN + OFI_ADDR_MAX + 64) / 8];
	uint8_t addr[OFI_ADDR_MAX];
	size_t addr_len;
	cci_event_t *ev;
	char *uri = NULL;
	uint32_t id = 0;
	struct raw r = { 0 };
	int format;

	if (!server || cci_get_opt(server, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS)
		return 0;
	format = uri_address(uri, addr, &addr_len);
	free(uri);
	if (format < 0 || raw_open(&r, addr, format) != 0) {
		id = format < 0 ? 0 : UINT32_MAX;
	} else if (raw_send(&r, buf, req_build(buf, &r, 0, hello_good(), "id")) == 0 &&
	           (ev = wait_request(server, &r, WAIT_MS)) != NULL) {
		if (cci_accept(ev, NULL) == CCI_SUCCESS)
			id = raw_accept_id(&r);
		cci_return_event(ev);
	}
	/* The endpoint goes first: it says DISC to the raw one, and libfabric
	 * 1.17's shm faults on a send to an endpoint of its own process that
	 * is already closed. */
	CU_ASSERT_EQUAL(cci_destroy_endpoint(server), CCI_SUCCESS);
	raw_close(&r);
	return id;
}

static void conn_ids_salted(void)
{
	cci_device_t *dev = ot_init();
	uint32_t id[3];

	CU_ASSERT_FATAL(dev != NULL);
	for (int i = 0; i < 3; i++) {
		id[i] = first_conn_id(dev);
		if (id[i] == UINT32_MAX) {
			ot_skip("no bare RDM endpoint of the provider for the server's address format");
			ot_fini(NULL);
			return;
		}
		CU_ASSERT_NOT_EQUAL(id[i], 0);
	}
	/* Unsalted, each life's first connection is slot 1, generation 1. */
	CU_ASSERT_FALSE(id[0] == id[1] && id[1] == id[2]);
	ot_fini(NULL);
}

int ot_add_hostile_suite(void)
{
	CU_pSuite s = CU_add_suite("hostile requests", NULL, NULL);

	return !s ||
	       !CU_add_test(s, "REQs to a connection id, without credits, over the mss limit, with "
	                       "unknown flags or a lying length never become CONNECT_REQUEST; a "
	                       "good one does, and the endpoint still connects",
	                    hostile_requests_refused) ||
	       !CU_add_test(s, "three endpoint lives do not give their first connection the same "
	                       "id (ids are salted per endpoint: a message for an earlier life's "
	                       "connection does not reach a new one)",
	                    conn_ids_salted);
}
