/*
 * sm_ring_fuzz.c - libFuzzer harness for the consumer side of the sm
 * transport's ring (plugins/sm/sm_ring.c).  The ring lives in memory the
 * peer writes: whatever it puts there (records, lengths, types, stamps),
 * the consumer hands out only records that lie inside the ring, or calls
 * the ring bad; it never reads or writes outside the segment, and its
 * releases keep the tail within what it read.
 *
 * The first input byte picks the record limit and the mode: raw (the data
 * area is the input) or records (the input is a list of {len, type}
 * headers written with valid stamps, so the fuzzer reaches the length
 * checks and the release path).  Then releases happen in an input-driven
 * order.
 *
 * Build (as tests/fuzz/run.sh does):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I plugins/sm \
 *         tests/fuzz/sm_ring_fuzz.c plugins/sm/sm_ring.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sm_ring.h"

#define DATA_SIZE 4096u
#define SEG_BYTES (SM_RING_CTL_BYTES + DATA_SIZE)
#define MAX_HELD 128

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Alignas(64) uint8_t seg[SEG_BYTES];

/* Records mode: 6 input bytes per header {u32 len, u16 type}, one lap. */
static void write_records(struct sm_ring *r, const uint8_t *data, size_t size)
{
	uint64_t pos = 0;

	for (size_t i = 0; i + 6 <= size && pos < DATA_SIZE; i += 6) {
		struct sm_rec *rec = (struct sm_rec *)(r->data + pos);
		uint32_t len;
		uint16_t type;

		memcpy(&len, data + i, 4);
		memcpy(&type, data + i + 4, 2);
		rec->len = len;
		rec->type = type;
		atomic_store_explicit(&rec->stamp, sm_ring_stamp(pos), memory_order_release);
		pos += len < DATA_SIZE ? sm_rec_size(len) : SM_LINE;
	}
	atomic_store_explicit(&r->ctl->head, pos, memory_order_release);
}

static void check_inside(const struct sm_ring *r, const struct sm_rec *rec)
{
	const uint8_t *p = (const uint8_t *)rec, *end = (const uint8_t *)r->data + r->size;
	volatile uint8_t sink = 0;

	if (p < (const uint8_t *)r->data || p + SM_REC_HDR > end ||
	    rec->len > (uint64_t)(end - p - SM_REC_HDR))
		abort();
	for (uint32_t i = 0; i < rec->len; i++) /* the application reads it all */
		sink ^= p[SM_REC_HDR + i];
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sm_rec *held[MAX_HELD];
	struct sm_ring r;
	size_t nheld = 0, order;
	int bad = 0;

	if (size < 2)
		return 0;
	memset(seg, 0, sizeof(seg));
	/* bit 6: a window of a quarter of the ring, the consumer's mark too */
	sm_ring_format(seg, DATA_SIZE, (data[0] & 0x40) ? DATA_SIZE / 4 : DATA_SIZE, data[0] & 0x3f);
	if (sm_ring_attach(&r, seg, sizeof(seg)) != 0)
		abort();
	order = data[1];
	if (data[0] & 0x80)
		write_records(&r, data + 2, size - 2);
	else
		memcpy(r.data, data + 2, size - 2 < DATA_SIZE ? size - 2 : DATA_SIZE);
	for (int n = 0; n < 2 * MAX_HELD && !bad; n++) {
		struct sm_rec *rec = sm_ring_peek(&r, &bad);

		if (!rec)
			break;
		check_inside(&r, rec);
		if (!sm_ring_may_consume(&r, rec))
			break;
		sm_ring_consume(&r, rec);
		held[nheld++] = rec;
		if (nheld == MAX_HELD || (order >> (n % 8)) & 1) /* give one back */
			sm_ring_release(&r, held[--nheld]);
	}
	for (size_t i = 0; i < nheld; i++) /* the rest, oldest first */
		sm_ring_release(&r, held[i]);
	if (r.tail > r.read)
		abort();
	return 0;
}
