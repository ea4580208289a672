/*
 * flight.c - work in flight towards a peer that is then killed, and what
 * the tests share.
 */
#include "fault.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define F_SENDS 100u
#define F_RMAS 8u
#define F_RMA_LEN (64u * 1024u)
#define F_OPS (F_SENDS + 2 * F_RMAS)

static void post_all(cci_connection_t *c, cci_rma_handle_t *lh, const cci_rma_handle_t *rh,
                     uint8_t *posted, struct f_flight *f)
{
	uint8_t msg[64];

	memset(msg, 0x5a, sizeof(msg));
	for (uint32_t i = 0; i < F_SENDS; i++) {
		int rc = cci_send(c, msg, sizeof(msg), h_ctx(i), 0);

		CHECK_RC2(rc, CCI_SUCCESS, CCI_ENOBUFS);
		posted[i] = rc == CCI_SUCCESS;
		f->sends += posted[i];
	}
	for (uint32_t i = 0; rh && i < 2 * F_RMAS; i++) {
		int flag = i < F_RMAS ? CCI_FLAG_WRITE : CCI_FLAG_READ;
		uint64_t off = (uint64_t)i * F_RMA_LEN;
		int rc = cci_rma(c, NULL, 0, lh, off, rh, off, F_RMA_LEN, h_ctx(F_SENDS + i),
		                 flag);

		CHECK_RC2(rc, CCI_SUCCESS, CCI_ENOBUFS);
		posted[F_SENDS + i] = rc == CCI_SUCCESS;
		if (flag == CCI_FLAG_WRITE)
			f->writes += posted[F_SENDS + i];
		else
			f->reads += posted[F_SENDS + i];
	}
}

/* Every posted operation completed once; those pending at the kill failed. */
static void check_each_once(const struct h_sendctr *ctr, const uint8_t *posted,
                            const uint8_t *before)
{
	uint32_t missing = 0, unposted = 0, ok_after = 0;

	for (uint32_t i = 0; i < F_OPS; i++) {
		if (posted[i] && !ctr->status_seen[i])
			missing++;
		if (!posted[i] && ctr->status_seen[i])
			unposted++;
		if (!before[i] && ctr->status_seen[i] == CCI_SUCCESS + 1)
			ok_after++;
	}
	CHECKF(missing == 0, "%u operations never completed after the peer was killed",
	       missing);
	CHECKF(unposted == 0, "%u operations that the calls refused completed", unposted);
	CHECKF(ok_after == 0, "%u operations pending at the kill completed with success",
	       ok_after);
	CHECKF(ctr->dup == 0 && ctr->foreign == 0, "%llu completions twice, %llu foreign",
	       (unsigned long long)ctr->dup, (unsigned long long)ctr->foreign);
}

void f_flight_kill(cci_endpoint_t *ep, cci_connection_t *c, cci_rma_handle_t *lh,
                   const cci_rma_handle_t *rh, pid_t pid, unsigned bound_ms,
                   struct f_flight *f)
{
	uint8_t posted[F_OPS], before[F_OPS];
	struct h_sendctr ctr;
	uint64_t total, t0, stop;

	memset(f, 0, sizeof(*f));
	h_sendctr_init(&ctr, F_OPS);
	post_all(c, lh, rh, posted, f);
	total = f->sends + f->writes + f->reads;
	for (stop = h_now_ms() + 300; h_now_ms() < stop;)
		if (!h_pump(ep, &ctr))
			h_sleep_ms(1);
	memcpy(before, ctr.status_seen, F_OPS);
	f->done_before = (uint32_t)(ctr.ok + ctr.err);
	CHECKF(f->done_before < total, "all %llu operations completed while the peer was "
	       "stopped: nothing was in flight", (unsigned long long)total);
	t0 = h_now_ms();
	kill(pid, SIGKILL);
	for (stop = t0 + bound_ms; ctr.ok + ctr.err < total && h_now_ms() < stop;) {
		uint64_t err = ctr.err;

		if (!h_pump(ep, &ctr))
			sched_yield();
		if (!err && ctr.err)
			f->detect_ms = h_now_ms() - t0;
	}
	f->all_ms = h_now_ms() - t0;
	f->first_err = ctr.first_err;
	CHECKF(ctr.ok + ctr.err == total, "%llu of %llu operations completed within %u ms "
	       "of the kill", (unsigned long long)(ctr.ok + ctr.err),
	       (unsigned long long)total, bound_ms);
	check_each_once(&ctr, posted, before);
	h_sendctr_free(&ctr);
}
