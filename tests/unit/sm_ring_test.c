/*
 * sm_ring_test.c - unit tests of the shared-memory ring (plugins/sm/sm_ring.h),
 * producer and consumer driven from one thread, plus a two-thread stress.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "sm_inbox.h"
#include "sm_ring.h"

#define TEST_SIZE 4096u

static void *seg;
static struct sm_ring prod, cons;

/* A fresh ring of size data bytes, with a producer view and a consumer view. */
static void ring_new_window(uint64_t size, uint64_t window, uint32_t max_recs)
{
	free(seg);
	seg = aligned_alloc(4096, (sm_ring_seg_bytes(size) + 4095) / 4096 * 4096);
	CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	memset(seg, 0, sm_ring_seg_bytes(size));
	sm_ring_format(seg, size, window, max_recs);
	CU_ASSERT_EQUAL_FATAL(sm_ring_attach(&prod, seg, sm_ring_seg_bytes(size)), 0);
	CU_ASSERT_EQUAL_FATAL(sm_ring_attach(&cons, seg, sm_ring_seg_bytes(size)), 0);
}

static void ring_new_limited(uint64_t size, uint32_t max_recs)
{
	ring_new_window(size, size, max_recs);
}

static void ring_new(uint64_t size)
{
	ring_new_limited(size, 0);
}

/* Send len bytes of value fill; 1 if it fit. */
static int put(uint32_t len, int fill)
{
	struct sm_rec *rec = sm_ring_reserve(&prod, len);

	if (!rec)
		return 0;
	memset(sm_rec_payload(rec), fill, len);
	sm_ring_commit(&prod, rec, SM_REC_MSG, len, (uint32_t)fill);
	return 1;
}

/* Take the next record, checking its contents; NULL if none. */
static struct sm_rec *get(uint32_t len, int fill)
{
	int bad = 0;
	struct sm_rec *rec = sm_ring_peek(&cons, &bad);
	const unsigned char *p;

	CU_ASSERT_EQUAL(bad, 0);
	if (!rec)
		return NULL;
	CU_ASSERT_EQUAL(rec->type, SM_REC_MSG);
	CU_ASSERT_EQUAL(rec->len, len);
	CU_ASSERT_EQUAL(rec->aux, (uint32_t)fill);
	p = sm_rec_payload(rec);
	CU_ASSERT_EQUAL((uintptr_t)p % 8, 0);
	for (uint32_t i = 0; i < len && i < rec->len; i++)
		if (p[i] != (unsigned char)fill) {
			CU_FAIL("payload corrupted");
			break;
		}
	sm_ring_consume(&cons, rec);
	return rec;
}

static void test_size_for(void)
{
	CU_ASSERT_EQUAL(sm_ring_size_for(1, 0), SM_RING_MIN_SIZE);
	CU_ASSERT_EQUAL(sm_ring_size_for(64, 8192), 1u << 20);
	/* Bytes capped at the cache size, or three records of the largest. */
	CU_ASSERT_EQUAL(sm_ring_size_for(1024, 8192), 1u << 20);
	CU_ASSERT_EQUAL(sm_ring_size_for(64, 65536), 1u << 20);
	CU_ASSERT_EQUAL(sm_ring_size_for(64, 1 << 20), 4u << 20);
	CU_ASSERT_EQUAL(sm_ring_size_for(2, 1 << 20), 4u << 20);
	CU_ASSERT_EQUAL(sm_ring_size_for(UINT32_MAX, 1 << 20), 4u << 20);
	CU_ASSERT_EQUAL(sm_ring_size_for(1, 1u << 29), 0);
	CU_ASSERT_EQUAL(sm_rec_size(0), 64);
	CU_ASSERT_EQUAL(sm_rec_size(48), 64);
	CU_ASSERT_EQUAL(sm_rec_size(49), 128);
}

static void test_attach_rejects_garbage(void)
{
	char junk[512];
	struct sm_ring r;

	memset(junk, 0x5a, sizeof(junk));
	CU_ASSERT_EQUAL(sm_ring_attach(&r, junk, sizeof(junk)), -1);
	ring_new(TEST_SIZE);
	/* A declared size larger than the segment is refused. */
	CU_ASSERT_EQUAL(sm_ring_attach(&r, seg, sm_ring_seg_bytes(TEST_SIZE) - 64), -1);
	/* So is a window that is not a power of two within the ring. */
	((struct sm_ring_ctl *)seg)->window = TEST_SIZE * 2;
	CU_ASSERT_EQUAL(sm_ring_attach(&r, seg, sm_ring_seg_bytes(TEST_SIZE)), -1);
	((struct sm_ring_ctl *)seg)->window = TEST_SIZE - 64;
	CU_ASSERT_EQUAL(sm_ring_attach(&r, seg, sm_ring_seg_bytes(TEST_SIZE)), -1);
	((struct sm_ring_ctl *)seg)->window = 0;
	CU_ASSERT_EQUAL(sm_ring_attach(&r, seg, sm_ring_seg_bytes(TEST_SIZE)), -1);
}

/* The inbox bit comes from the peer's ring header: one past the inbox is
 * refused, the last one is taken. */
static void test_attach_checks_inbox_bit(void)
{
	struct sm_ring r;

	ring_new(TEST_SIZE);
	sm_ring_set_bit(seg, SM_INBOX_BITS);
	CU_ASSERT_EQUAL(sm_ring_attach(&r, seg, sm_ring_seg_bytes(TEST_SIZE)), -1);
	sm_ring_set_bit(seg, UINT32_MAX);
	CU_ASSERT_EQUAL(sm_ring_attach(&r, seg, sm_ring_seg_bytes(TEST_SIZE)), -1);
	sm_ring_set_bit(seg, SM_INBOX_BITS - 1);
	CU_ASSERT_EQUAL_FATAL(sm_ring_attach(&r, seg, sm_ring_seg_bytes(TEST_SIZE)), 0);
	CU_ASSERT_EQUAL(r.bit, SM_INBOX_BITS - 1);
}

/* ------------------------------------------------------------------------ */
/* The inbox (sm_inbox.h)                                                    */
/* ------------------------------------------------------------------------ */

static struct sm_inbox inbox;
static uint8_t found[SM_INBOX_BITS];

static void collect(void *arg, uint32_t w, uint64_t taken)
{
	(void)arg;
	for (; taken; taken &= taken - 1)
		found[w * 64u + (uint32_t)__builtin_ctzll(taken)]++;
}

/* Marked bits, at the edges of the words and levels and at random, are
 * each found once by a scan, and the inbox is empty after it. */
static void test_inbox_finds_marked_once(void)
{
	static const uint32_t edges[] = { 0, 1, 63, 64, 127, 4095, 4096, 40000, 65534, 65535 };
	static uint8_t marked[SM_INBOX_BITS];

	memset(&inbox, 0, sizeof(inbox));
	memset(found, 0, sizeof(found));
	memset(marked, 0, sizeof(marked));
	srand(7);
	for (unsigned i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		marked[edges[i]] = 1;
	for (int i = 0; i < 500; i++)
		marked[(uint32_t)rand() % SM_INBOX_BITS] = 1;
	for (uint32_t b = 0; b < SM_INBOX_BITS; b++)
		if (marked[b]) {
			sm_inbox_mark(&inbox, b);
			sm_inbox_mark(&inbox, b); /* twice: found once all the same */
		}
	sm_inbox_scan(&inbox, NULL, collect, NULL);
	for (uint32_t b = 0; b < SM_INBOX_BITS; b++)
		if (found[b] != marked[b]) {
			CU_FAIL("a marked bit not found once, or an unmarked one found");
			break;
		}
	CU_ASSERT_EQUAL(atomic_load(&inbox.top), 0);
	for (uint32_t w = 0; w < SM_INBOX_WORDS; w++)
		if (atomic_load(&inbox.bits[w]) != 0) {
			CU_FAIL("a word still set after the scan");
			break;
		}
}

/* A kept bit stays set and is never reported; the word's other bits are,
 * though no summary bit flags them (its kept bit made it non-zero). */
static void test_inbox_keeps_hot_bits(void)
{
	static uint64_t keep[SM_INBOX_WORDS];
	uint64_t taken;

	memset(&inbox, 0, sizeof(inbox));
	memset(found, 0, sizeof(found));
	keep[3] = 1ull << 5;
	atomic_fetch_or(&inbox.bits[3], keep[3]); /* what progress does for a hot ring */
	sm_inbox_mark(&inbox, 3 * 64 + 5);       /* its sender: found set, nothing else */
	CU_ASSERT_EQUAL(atomic_load(&inbox.top), 0);
	sm_inbox_mark(&inbox, 3 * 64 + 9);       /* another ring of the same word */
	CU_ASSERT_EQUAL(atomic_load(&inbox.top), 0);
	sm_inbox_scan(&inbox, keep, collect, NULL);
	CU_ASSERT_EQUAL(found[3 * 64 + 9], 0);   /* not flagged above: the caller compares */
	taken = sm_inbox_take_word(&inbox, 3, keep[3]);
	CU_ASSERT_EQUAL(taken, 1ull << 9);
	CU_ASSERT_EQUAL(atomic_load(&inbox.bits[3]), keep[3]);
	sm_inbox_mark(&inbox, 700);              /* elsewhere: flagged as usual */
	sm_inbox_scan(&inbox, keep, collect, NULL);
	CU_ASSERT_EQUAL(found[700], 1);
	CU_ASSERT_EQUAL(found[3 * 64 + 5], 0);
	CU_ASSERT_EQUAL(atomic_load(&inbox.bits[3]), keep[3]);
}

/* Producers publish (a counter per bit), fence and mark; the consumer
 * scans, fences and reads the counters.  Once the producers are done, a
 * last scan must leave every counter seen at its final value: no
 * publication is ever left without a bit (the argument of sm_inbox.h). */
#define INBOX_BITS_USED 3000u
#define INBOX_MARKS 1000000u
static _Atomic uint32_t published[INBOX_BITS_USED];
static uint32_t seen[INBOX_BITS_USED];
static _Atomic int producers_left;

static void *inbox_producer(void *arg)
{
	uint32_t x = (uint32_t)(uintptr_t)arg;

	for (uint32_t i = 0; i < INBOX_MARKS; i++) {
		uint32_t b;
		x = x * 1103515245u + 12345u;
		b = (x >> 8) % INBOX_BITS_USED;
		/* spread over the levels: every 20th word of bits */
		atomic_fetch_add_explicit(&published[b], 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		sm_inbox_mark(&inbox, (b / 64u) * 20u * 64u + b % 64u);
	}
	atomic_fetch_sub(&producers_left, 1);
	return NULL;
}

/* Bits taken, fenced, then the counters read (what progress does with
 * rings); ring 20 w + b of a used word is counter 64 (w / 20) + b. */
static void consume_found(void *arg, uint32_t w, uint64_t taken)
{
	(void)arg;
	atomic_thread_fence(memory_order_seq_cst);
	for (; taken; taken &= taken - 1) {
		uint32_t b = (w / 20u) * 64u + (uint32_t)__builtin_ctzll(taken);
		if (w % 20u == 0 && b < INBOX_BITS_USED)
			seen[b] = atomic_load_explicit(&published[b], memory_order_relaxed);
	}
}

static void inbox_consume_once(void)
{
	sm_inbox_scan(&inbox, NULL, consume_found, NULL);
}

static void test_inbox_two_threads_miss_nothing(void)
{
	pthread_t t[2];
	uint32_t missed = 0;

	memset(&inbox, 0, sizeof(inbox));
	memset(seen, 0, sizeof(seen));
	for (uint32_t b = 0; b < INBOX_BITS_USED; b++)
		atomic_store(&published[b], 0);
	atomic_store(&producers_left, 2);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t[0], NULL, inbox_producer, (void *)1), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t[1], NULL, inbox_producer, (void *)2), 0);
	while (atomic_load(&producers_left) > 0)
		inbox_consume_once();
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	inbox_consume_once();
	for (uint32_t b = 0; b < INBOX_BITS_USED; b++)
		missed += seen[b] != atomic_load(&published[b]);
	CU_ASSERT_EQUAL(missed, 0);
}

/* Offset of rec in the ring's data. */
static uint64_t off_of(const struct sm_rec *rec)
{
	return (uint64_t)((const char *)rec - prod.data);
}

/* Take the next record if the consumer may (sm_ring_may_consume), as
 * the plugin's drain does; NULL when there is none or it must stop. */
static struct sm_rec *get_may(uint32_t len, int fill)
{
	int bad = 0;
	struct sm_rec *rec = sm_ring_peek(&cons, &bad);

	if (!rec || !sm_ring_may_consume(&cons, rec))
		return NULL;
	return get(len, fill);
}

#define WIN_SIZE 16384u
#define WIN 4096u
#define WIN_LEN 448u /* records of 512 bytes: 8 in the window, 32 in the ring */

static void test_window_while_consumer_keeps_up(void)
{
	ring_new_window(WIN_SIZE, WIN, 0);
	for (int i = 0; i < 200; i++) {
		struct sm_rec *rec = sm_ring_reserve(&prod, WIN_LEN), *got;

		CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
		CU_ASSERT(off_of(rec) + sm_rec_size(WIN_LEN) <= WIN);
		memset(sm_rec_payload(rec), i & 0xff, WIN_LEN);
		sm_ring_commit(&prod, rec, SM_REC_MSG, WIN_LEN, (uint32_t)(i & 0xff));
		got = get_may(WIN_LEN, i & 0xff);
		CU_ASSERT_PTR_NOT_NULL_FATAL(got);
		sm_ring_release(&cons, got);
	}
	CU_ASSERT_EQUAL(atomic_load(&cons.ctl->hold), 0);
}

/* Take records into held[n..max) while the consumer may; the new n. */
static uint32_t take_while_may(struct sm_rec **held, uint32_t n, uint32_t max)
{
	while (n < max && (held[n] = get_may(WIN_LEN, (int)(n & 0xff))) != NULL)
		n++;
	return n;
}

static void test_window_grows_while_application_holds(void)
{
	struct sm_rec *held[WIN_SIZE / 512];
	uint32_t n = 0, sent = 0;

	ring_new_window(WIN_SIZE, WIN, 0);
	while (put(WIN_LEN, (int)(sent & 0xff)))
		sent++;
	CU_ASSERT_EQUAL(sent, WIN / 512); /* nothing consumed: the window is full */
	/* The drain stops at half the window; nothing comes back... */
	n = take_while_may(held, n, WIN_SIZE / 512);
	CU_ASSERT_EQUAL(n, WIN / 512 / 2);
	CU_ASSERT_EQUAL(atomic_load(&cons.ctl->hold), 0);
	/* ...so the next drain marks the ring held and goes on. */
	CU_ASSERT_EQUAL(sm_ring_may_consume(&cons, sm_ring_peek(&cons, &(int){ 0 })), 2);
	CU_ASSERT_EQUAL(atomic_load(&cons.ctl->hold), 1);
	n = take_while_may(held, n, WIN_SIZE / 512);
	CU_ASSERT_EQUAL(n, sent);
	/* The producer now fills the whole ring, past the window. */
	while (put(WIN_LEN, (int)(sent & 0xff)))
		sent++;
	CU_ASSERT_EQUAL(sent, WIN_SIZE / 512);
	n = take_while_may(held, n, WIN_SIZE / 512);
	CU_ASSERT_EQUAL(n, sent);
	/* Everything back: the mark drops and the producer keeps to the
	 * window again. */
	for (uint32_t i = 0; i < n; i++)
		sm_ring_release(&cons, held[i]);
	CU_ASSERT_EQUAL(atomic_load(&cons.ctl->hold), 0);
	for (int i = 0; i < 40; i++) {
		struct sm_rec *rec = sm_ring_reserve(&prod, WIN_LEN), *got;

		CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
		CU_ASSERT(off_of(rec) + sm_rec_size(WIN_LEN) <= WIN);
		sm_ring_commit(&prod, rec, SM_REC_MSG, WIN_LEN, 7);
		memset(sm_rec_payload(rec), 7, WIN_LEN);
		got = get_may(WIN_LEN, 7);
		CU_ASSERT_PTR_NOT_NULL_FATAL(got);
		sm_ring_release(&cons, got);
	}
}

static void test_empty_and_zero_length(void)
{
	struct sm_rec *rec;

	ring_new(TEST_SIZE);
	CU_ASSERT_PTR_NULL(get(0, 0));
	CU_ASSERT_TRUE(put(0, 7));
	rec = get(0, 7);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	CU_ASSERT_PTR_NULL(get(0, 0));
	CU_ASSERT_EQUAL(sm_ring_release(&cons, rec), 1);
	CU_ASSERT_EQUAL(sm_ring_held(&cons), 0);
}

/* Zero-length records fill the ring one line each. */
static void test_full_ring(void)
{
	unsigned n = 0;

	ring_new(TEST_SIZE);
	while (put(0, (int)n))
		n++;
	CU_ASSERT_EQUAL(n, TEST_SIZE / SM_LINE);
	CU_ASSERT_FALSE(put(0, 0));
	/* Consuming without releasing frees nothing. */
	for (unsigned i = 0; i < n; i++)
		CU_ASSERT_PTR_NOT_NULL(get(0, (int)i));
	CU_ASSERT_FALSE(put(0, 0));
}

/* The record limit (the receiver's buffer count) holds whatever the bytes say;
 * PAD records do not count. */
static void test_record_limit(void)
{
	struct sm_rec *r[3];

	ring_new_limited(TEST_SIZE, 3);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_TRUE(put(0, i));
	CU_ASSERT_FALSE(put(0, 3));
	for (int i = 0; i < 3; i++)
		r[i] = get(0, i);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r[2]);
	CU_ASSERT_FALSE(put(0, 3)); /* consumed but still lent */
	sm_ring_release(&cons, r[1]);
	CU_ASSERT_FALSE(put(0, 3)); /* tail has not moved: nothing is reclaimed yet */
	sm_ring_release(&cons, r[0]);
	CU_ASSERT_TRUE(put(0, 3));
	CU_ASSERT_TRUE(put(0, 4));
	CU_ASSERT_FALSE(put(0, 5));
	sm_ring_release(&cons, r[2]);
	/* Wrap: 3 x 1216 bytes, then a 4th record behind a PAD still fits the limit. */
	ring_new_limited(TEST_SIZE, 3);
	CU_ASSERT_TRUE(put(1200, 1));
	CU_ASSERT_TRUE(put(1200, 2));
	r[0] = get(1200, 1);
	r[1] = get(1200, 2);
	sm_ring_release(&cons, r[0]);
	sm_ring_release(&cons, r[1]);
	CU_ASSERT_TRUE(put(1200, 3));
	CU_ASSERT_TRUE(put(1200, 4)); /* after a PAD */
	CU_ASSERT_TRUE(put(1200, 5));
	CU_ASSERT_FALSE(put(0, 6));
	CU_ASSERT_PTR_NOT_NULL(get(1200, 3));
	CU_ASSERT_PTR_NOT_NULL(get(1200, 4));
	CU_ASSERT_PTR_NOT_NULL(get(1200, 5));
}

static void test_wrap_with_pad(void)
{
	struct sm_rec *a, *b, *c;

	ring_new(TEST_SIZE);
	/* 3 x 1216 bytes leave 448 bytes at the end: the 4th record wraps. */
	CU_ASSERT_TRUE(put(1200, 1));
	CU_ASSERT_TRUE(put(1200, 2));
	CU_ASSERT_TRUE(put(1200, 3));
	CU_ASSERT_FALSE(put(1200, 4)); /* needs the PAD plus space at the start */
	a = get(1200, 1);
	b = get(1200, 2);
	c = get(1200, 3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(sm_ring_release(&cons, a), 1);
	CU_ASSERT_TRUE(put(1200, 4)); /* lands at offset 0 */
	CU_ASSERT_EQUAL(sm_ring_held(&cons), 2 * sm_rec_size(1200));
	a = get(1200, 4);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_EQUAL(a, (struct sm_rec *)cons.data);
	sm_ring_release(&cons, b);
	sm_ring_release(&cons, c);
	sm_ring_release(&cons, a);
	CU_ASSERT_EQUAL(sm_ring_held(&cons), 0);
}

static void test_out_of_order_release(void)
{
	struct sm_rec *r[4];

	ring_new(TEST_SIZE);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_TRUE(put(100, i));
	for (int i = 0; i < 4; i++)
		r[i] = get(100, i);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r[3]);
	CU_ASSERT_EQUAL(sm_ring_release(&cons, r[2]), 0);
	CU_ASSERT_EQUAL(sm_ring_release(&cons, r[1]), 0);
	CU_ASSERT_EQUAL(sm_ring_held(&cons), 4 * 128);
	CU_ASSERT_EQUAL(sm_ring_release(&cons, r[0]), 1); /* tail jumps over 0, 1, 2 */
	CU_ASSERT_EQUAL(sm_ring_held(&cons), 128);
	CU_ASSERT_EQUAL(sm_ring_release(&cons, r[3]), 1);
	CU_ASSERT_EQUAL(sm_ring_held(&cons), 0);
}

/* Old payload bytes that happen to equal a future stamp never look ready. */
static void test_stale_bytes_never_ready(void)
{
	struct sm_rec *rec;
	uint32_t *w;

	ring_new(TEST_SIZE);
	/* A big record whose payload is full of every plausible stamp value. */
	rec = sm_ring_reserve(&prod, 2000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	w = sm_rec_payload(rec);
	for (unsigned i = 0; i < 500; i++)
		w[i] = sm_ring_stamp((uint64_t)TEST_SIZE + (i / 16) * 64);
	sm_ring_commit(&prod, rec, SM_REC_MSG, 2000, 0);
	rec = sm_ring_peek(&cons, &(int){ 0 });
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	sm_ring_consume(&cons, rec);
	sm_ring_release(&cons, rec);
	/* Walk a full lap of small records over the old payload. */
	for (int lap = 0; lap < 3; lap++) {
		for (unsigned i = 0; i < TEST_SIZE / SM_LINE - 1; i++) {
			struct sm_rec *x;
			CU_ASSERT_TRUE_FATAL(put(8, (int)i));
			x = get(8, (int)i);
			CU_ASSERT_PTR_NOT_NULL_FATAL(x);
			CU_ASSERT_PTR_NULL(sm_ring_peek(&cons, &(int){ 0 }));
			sm_ring_release(&cons, x);
		}
	}
}

/*
 * Random sizes, releases held back and out of order, rings full and
 * empty: every payload word is the stamp its line would carry a lap
 * later, the worst old bytes a consumer can meet.  The consumer must see
 * exactly the records sent, in order, and nothing else.
 */
/* The consumer drains as the plugin does (sm_ring_may_consume), so with a
 * window smaller than the ring the producer wraps early, records larger
 * than the window go at offset 0, and held records open the whole ring. */
static void stale_stamps_random(uint64_t window)
{
	enum { HOLD = 6, ROUNDS = 60000 };
	struct sm_rec *held[HOLD] = { NULL };
	uint32_t lens[64], sent = 0, got = 0, seed = 12345, holds = 0, early = 0;

	ring_new_window(TEST_SIZE, window, 0);
	for (int round = 0; round < ROUNDS; round++) {
		seed = seed * 1103515245u + 12345u;
		uint32_t r = seed >> 8;
		if (r % 3 != 0 && sent - got < 64) { /* produce */
			uint32_t len = (r >> 4) % (r % 5 == 0 ? 1500u : 120u);
			struct sm_rec *rec = sm_ring_reserve(&prod, len);
			if (rec) {
				uint64_t pos = (uint64_t)((char *)rec - prod.data) +
				               (prod.head & ~prod.mask);
				uint32_t *w = sm_rec_payload(rec);
				for (uint32_t i = 0; i < len / 4; i++) {
					uint64_t line = (pos + SM_REC_HDR + 4 * i) & ~(uint64_t)(SM_LINE - 1);
					w[i] = sm_ring_stamp(line + TEST_SIZE);
				}
				/* a PAD just before it, where the record would have fit */
				const struct sm_rec *last = (const struct sm_rec *)(
					prod.data + ((prod.head - prod.last_size) & prod.mask));
				early += off_of(rec) == 0 && sent > 0 && last->type == SM_REC_PAD &&
				         prod.last_size >= sm_rec_size(len);
				sm_ring_commit(&prod, rec, SM_REC_MSG, len, sent);
				lens[sent++ % 64] = len;
			}
		} else { /* consume one, release one of those held */
			int bad = 0;
			struct sm_rec *rec = sm_ring_peek(&cons, &bad);
			CU_ASSERT_EQUAL_FATAL(bad, 0);
			if (got == sent) {
				CU_ASSERT_PTR_NULL_FATAL(rec);
			} else {
				CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
				CU_ASSERT_EQUAL_FATAL(rec->aux, got);
				CU_ASSERT_EQUAL_FATAL(rec->len, lens[got % 64]);
				holds += cons.hold;
				if (sm_ring_may_consume(&cons, rec)) {
					sm_ring_consume(&cons, rec);
					got++;
				} else {
					rec = NULL;
				}
			}
			uint32_t slot = (r >> 3) % HOLD;
			if (held[slot])
				sm_ring_release(&cons, held[slot]);
			held[slot] = rec;
		}
	}
	CU_ASSERT_TRUE(got > ROUNDS / 4);
	if (window < TEST_SIZE) /* both ways of the window were taken */
		CU_ASSERT_TRUE(holds > 0 && early > 0);
}

static void test_stale_stamps_random(void)
{
	stale_stamps_random(TEST_SIZE);
}

static void test_stale_stamps_random_window(void)
{
	stale_stamps_random(TEST_SIZE / 4);
}

static void test_bad_length_detected(void)
{
	struct sm_rec *rec;
	int bad = 0;

	ring_new(TEST_SIZE);
	rec = sm_ring_reserve(&prod, 8);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	rec->len = TEST_SIZE; /* forged after reserve, as a hostile peer might */
	atomic_store(&rec->stamp, sm_ring_stamp(0));
	CU_ASSERT_PTR_NULL(sm_ring_peek(&cons, &bad));
	CU_ASSERT_EQUAL(bad, 1);
}

/* Two threads, varying sizes, releases lagging behind: data and order hold. */
#define STRESS_N 200000u

static void *stress_producer(void *arg)
{
	(void)arg;
	for (uint32_t i = 0; i < STRESS_N; i++) {
		uint32_t len = (i * 37u) % 700u;
		struct sm_rec *rec;
		while (!(rec = sm_ring_reserve(&prod, len)))
			;
		memset(sm_rec_payload(rec), (int)(i & 0xff), len);
		sm_ring_commit(&prod, rec, SM_REC_MSG, len, i);
	}
	return NULL;
}

static void test_two_threads(void)
{
	pthread_t t;
	struct sm_rec *held[3] = { NULL, NULL, NULL };
	uint32_t i = 0;

	ring_new(1u << 14);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, stress_producer, NULL), 0);
	while (i < STRESS_N) {
		int bad = 0;
		struct sm_rec *rec = sm_ring_peek(&cons, &bad);
		if (!rec)
			continue;
		if (rec->aux != i || rec->len != (i * 37u) % 700u ||
		    (rec->len && ((unsigned char *)sm_rec_payload(rec))[rec->len - 1] != (i & 0xff))) {
			CU_FAIL("order or payload broken");
			break;
		}
		sm_ring_consume(&cons, rec);
		/* Release in a rotating, out-of-order pattern. */
		if (held[i % 3])
			sm_ring_release(&cons, held[i % 3]);
		held[i % 3] = rec;
		i++;
	}
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(i, STRESS_N);
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("sm_ring", NULL, NULL);
	CU_add_test(s, "ring size for count and mss", test_size_for);
	CU_add_test(s, "attach rejects a foreign segment", test_attach_rejects_garbage);
	CU_add_test(s, "attach refuses an inbox bit past the inbox", test_attach_checks_inbox_bit);
	CU_add_test(s, "the inbox finds every marked ring once", test_inbox_finds_marked_once);
	CU_add_test(s, "the inbox leaves kept bits set and unreported", test_inbox_keeps_hot_bits);
	CU_add_test(s, "marks racing with scans: the last publication of every ring is seen",
	            test_inbox_two_threads_miss_nothing);
	CU_add_test(s, "empty ring and zero-length records", test_empty_and_zero_length);
	CU_add_test(s, "a full ring refuses until released", test_full_ring);
	CU_add_test(s, "a record that does not fit wraps behind a PAD", test_wrap_with_pad);
	CU_add_test(s, "the record limit bounds lent records, PADs excepted", test_record_limit);
	CU_add_test(s, "releases out of order free space in order", test_out_of_order_release);
	CU_add_test(s, "the producer keeps to the window while the consumer keeps up",
	            test_window_while_consumer_keeps_up);
	CU_add_test(s, "an application holding records opens the whole ring, then the window again",
	            test_window_grows_while_application_holds);
	CU_add_test(s, "stale payload bytes never look like a record", test_stale_bytes_never_ready);
	CU_add_test(s, "random sizes and held records: old payload is never a record",
	            test_stale_stamps_random);
	CU_add_test(s, "the same with a window of a quarter of the ring",
	            test_stale_stamps_random_window);
	CU_add_test(s, "a length past the end is reported", test_bad_length_detected);
	CU_add_test(s, "two threads keep order and data", test_two_threads);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	free(seg);
	return failed ? 1 : 0;
}
