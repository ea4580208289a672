/*
 * sm_ctl_fuzz.c - libFuzzer harness for the sm transport's control
 * messages (plugins/sm/sm_ctl_wire.c), the records a peer process writes
 * on a connection's UNIX socket.  Whatever the record, the decoder
 * accepts it only within the promised limits (and then the encoder writes
 * the same bytes back), or refuses it with a reason; it never reads past
 * the record.
 *
 * The first input byte gives the number of descriptors that came with the
 * record (0..SM_HELLO_FDS, as sm_ctl_recv reports), the rest is the record.
 *
 * Build (as tests/fuzz/run.sh does):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I api -I plugins/sm \
 *         tests/fuzz/sm_ctl_fuzz.c plugins/sm/sm_ctl_wire.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm_ctl_wire.h"
#include "sm_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const struct sm_ctl_hello *m, const uint8_t *rec, size_t len, int nfds)
{
	static uint8_t again[sizeof(struct sm_ctl_hello)];
	size_t n;

	if (m->hdr.magic != SM_CTL_MAGIC || m->hdr.version != SM_CTL_VERSION)
		abort();
	if (m->hdr.type == SM_CTL_REQ || m->hdr.type == SM_CTL_ACCEPT) {
		if (nfds != SM_HELLO_FDS || m->core.data_len > CCI_CONN_REQ_LEN ||
		    len != SM_CTL_HELLO_HEAD + m->core.data_len || m->core.mss < SM_MSS_MIN ||
		    m->core.mss > SM_MSS_MAX || m->ring_size < SM_RING_MIN_SIZE ||
		    m->ring_size > SM_RING_MAX_SIZE || (m->ring_size & (m->ring_size - 1)) ||
		    (m->hdr.type == SM_CTL_ACCEPT && m->core.data_len) ||
		    (m->hdr.type == SM_CTL_REQ && m->core.attr > CCI_CONN_ATTR_UU))
			abort();
		for (size_t i = m->core.data_len; i < CCI_CONN_REQ_LEN; i++)
			if (m->data[i])
				abort();
	} else if (m->hdr.type < SM_CTL_REJECT || m->hdr.type > SM_CTL_LAST || nfds != 0 ||
	           len != sizeof(m->hdr)) {
		abort();
	}
	n = sm_ctl_encode(m->hdr.type, m, again, sizeof(again));
	if (n != len || memcmp(again, rec, len) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sm_ctl_hello m;
	const char *why = NULL;
	uint8_t *rec;
	size_t len;
	int nfds;

	if (size == 0)
		return 0;
	nfds = data[0] % (SM_HELLO_FDS + 1);
	len = size - 1;
	/* A copy of exactly len bytes, so that ASan sees any read past it. */
	rec = malloc(len ? len : 1);
	if (!rec)
		return 0;
	memcpy(rec, data + 1, len);
	if (sm_ctl_decode(rec, len, nfds, &m, &why) == CCI_SUCCESS) {
		if (why)
			abort();
		check_accepted(&m, rec, len, nfds);
	} else if (!why) {
		abort();
	}
	free(rec);
	return 0;
}
