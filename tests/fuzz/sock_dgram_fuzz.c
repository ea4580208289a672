/*
 * sock_dgram_fuzz.c - libFuzzer harness for the sock transport's datagram
 * decoder (plugins/sock/sock_dgram.c): every byte string decodes to a
 * datagram within its promises, or is refused with a reason; never a
 * crash, never a read outside the input.  A decoded datagram encodes back
 * to the same header bytes.  The reader of datagrams quoted by ICMP errors
 * (any prefix of one) agrees with the decoder on the type and token.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "sock_dgram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MSS 65536u

static void check_datagram(const uint8_t *data, size_t size, const struct sock_dg *d)
{
	uint32_t sl = sock_dg_sub_len(d->type);
	uint8_t again[SOCK_DG_HDR_LEN + SOCK_DG_SUB_MAX];

	if (d->type == 0 || d->type >= SOCK_DG_TYPE_END)
		abort();
	if (d->body != data + SOCK_DG_HDR_LEN + sl || SOCK_DG_HDR_LEN + sl + d->body_len != size)
		abort();
	if (d->type == SOCK_DG_MSG &&
	    (d->sub.op > MSS || (uint64_t)d->sub.val + d->body_len > d->sub.op))
		abort();
	if (sock_dg_encode(again, d) != SOCK_DG_HDR_LEN + sl)
		abort();
	/* Reserved bytes of a sub-header may differ; the header may not. */
	if (memcmp(again, data, SOCK_DG_HDR_LEN) != 0)
		abort();
}

static void check_bodies(const struct sock_dg *d)
{
	struct sock_dg_hello h;
	struct sock_dg_accept a;
	const char *why = NULL;

	if (d->type == SOCK_DG_HELLO) {
		if (sock_dg_hello_decode(d->body, d->body_len, &h, &why) == 0) {
			if (h.core.data_len > CCI_CONN_REQ_LEN ||
			    h.core.data_len + SOCK_DG_HELLO_LEN != d->body_len ||
			    h.core.attr > CCI_CONN_ATTR_UU || !h.core.mss || !h.core.credits ||
			    !h.core.nonce || h.dgram < SOCK_DG_DGRAM_MIN)
				abort();
		} else if (!why) {
			abort();
		}
	}
	if (d->type == SOCK_DG_ACCEPT) {
		if (sock_dg_accept_decode(d->body, d->body_len, &a, &why) == 0) {
			if (a.core.attr || a.core.data_len || !a.core.mss || !a.core.credits ||
			    !a.core.nonce || !a.token || a.dgram < SOCK_DG_DGRAM_MIN)
				abort();
		} else if (!why) {
			abort();
		}
	}
}

/* The quoted reader on the whole input, knowing whether it decoded (ok,
 * d). */
static void check_quoted(const uint8_t *data, size_t size, int ok, const struct sock_dg *d)
{
	struct sock_dg_hello h;
	const char *why = NULL;
	uint64_t token;
	uint8_t type;

	if (sock_dg_quoted(data, size, &type, &token) != 0)
		return;
	if (type == 0 || type >= SOCK_DG_TYPE_END || token == 0 || size < SOCK_DG_HDR_LEN)
		abort();
	if (!ok || type != d->type)
		return;
	if (type != SOCK_DG_HELLO && token != d->token)
		abort();
	if (type == SOCK_DG_HELLO && sock_dg_hello_decode(d->body, d->body_len, &h, &why) == 0 &&
	    token != h.core.nonce)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sock_dg d;
	const char *why = NULL;
	int ok = sock_dg_decode(data, size, MSS, &d, &why) == 0;

	check_quoted(data, size, ok, &d);
	if (!ok) {
		if (!why)
			abort();
		return 0;
	}
	check_datagram(data, size, &d);
	check_bodies(&d);
	return 0;
}
