/*
 * sm_ring.h - single-producer single-consumer byte ring in shared memory.
 *
 * One ring carries one direction of one connection.  It lives in a memory
 * segment created by its consumer (the receiver) and mapped read-write by
 * both processes.  Layout of the segment:
 *
 *   offset   0  line 0: magic, version, data size, head (producer writes),
 *                      window, max_recs, inbox_bit
 *   offset  64  line 1: prod_waiting (producer sets, consumer clears)
 *   offset 128  line 2: tail (consumer writes)
 *   offset 192  data: size bytes, size a power of two, 64-byte granular
 *
 * A record starts on a 64-byte boundary with a 16-byte header followed by
 * its payload (8-byte aligned, contiguous: a record never wraps; when one
 * does not fit before the end the producer fills the rest with a PAD
 * record).  The header's stamp word is the ready flag: the producer writes
 * payload and header, then stores stamp = sm_ring_stamp(position) with
 * release ordering; the consumer polls the stamp at its read position with
 * acquire loads.  Before a stamp is stored, the first word of the line
 * after the record (where the consumer polls next) is 0: the producer
 * keeps free lines ahead of head cleared (a few after each record, a
 * record's length when it is idle: sm_ring_warm), so old payload bytes
 * never pass for a stamp; the only old header the consumer can meet at
 * its read position is the oldest unreleased record's (ring completely
 * held), whose stamp is one lap old.  The consumer writes no payload
 * line: one it does not read stays in the producer's cache for the next
 * lap, and only the header line changes hands for a record nobody reads.
 *
 * Records are lent to the application and may be released in any order:
 * the consumer marks a record released and moves tail over the longest
 * run of released records.  The producer reads tail only when its cached
 * copy says the ring is full.
 *
 * The window: a ring is sized for the records the application may hold
 * (recv_buf_count of mss), but a producer that walked all of it on every
 * lap would miss the cache on every copy.  So the producer wraps at
 * window bytes (a PAD record runs to the end of the ring) while the
 * consumer keeps up, and uses the whole ring only while the consumer says
 * the application holds records back (ctl->hold): see
 * sm_ring_may_consume().
 *
 * No function here allocates, locks or makes a system call.  The producer
 * side and the consumer side are each used by one thread at a time (the
 * caller serialises).
 */
#ifndef CCI_SM_RING_H
#define CCI_SM_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SM_LINE 64u
#define SM_RING_MAGIC 0x434d5352u /* "RSMC" */
/* 5: the inbox bit; 4: one RMA record type; 3: the window; 2: the producer clears lines */
#define SM_RING_VERSION 5u
#define SM_RING_CTL_BYTES (3u * SM_LINE)
#define SM_REC_HDR 16u
#define SM_RING_MIN_SIZE 4096u
#define SM_RING_MAX_SIZE (1ull << 30)
#define SM_RING_CACHE_SIZE (1ull << 20) /* see sm_ring_size_for() */
#define SM_RING_WINDOW (1ull << 17)     /* see sm_ring_window_for() */
#define SM_RING_MIN_RECS 3u
/* Receive rings an endpoint can have at once: the bits of its inbox
 * (sm_inbox.h).  A ring's bit is below this. */
#define SM_INBOX_BITS 65536u

/* Record types.  PAD is consumed by the ring itself. */
enum sm_rec_type {
	SM_REC_PAD = 1,
	SM_REC_MSG = 2,      /* an active message (or an RMA completion message) */
	SM_REC_RMA = 3       /* copy-mode RMA: one record of plugins/common/emu_rma_wire.h */
};

/* The 16-byte header of a record, at a 64-byte boundary of the data area. */
struct sm_rec {
	_Atomic uint32_t stamp; /* ready word: sm_ring_stamp(position) once published */
	uint32_t len;           /* payload bytes */
	uint16_t type;          /* enum sm_rec_type */
	uint16_t released;      /* consumer's mark: the record may be reclaimed */
	uint32_t aux;           /* type-specific (unused today) */
};

/* The shared control lines at the start of a ring segment. */
struct sm_ring_ctl {
	uint32_t magic;
	uint32_t version;
	uint64_t size;                 /* data bytes, a power of two */
	_Atomic uint64_t head;         /* bytes published (monotonic) */
	uint64_t window;               /* the producer wraps here unless hold */
	uint32_t max_recs;             /* records the consumer lends at most, 0 = no limit */
	uint32_t inbox_bit;            /* the ring's bit in the consumer's inbox (sm_inbox.h) */
	char pad0[SM_LINE - 40];
	_Atomic uint32_t prod_waiting; /* the producer has sends queued for space */
	char pad1[SM_LINE - 4];
	_Atomic uint64_t tail;         /* bytes released (monotonic) */
	_Atomic uint64_t rel_recs;     /* records (PADs excluded) released (monotonic) */
	_Atomic uint32_t hold;         /* the application holds records: use the whole ring */
	char pad2[SM_LINE - 20];
};

/*
 * A process's view of a ring.  The producer uses head/tail_cache, the
 * consumer read/tail; each side ignores the other's fields.
 */
struct sm_ring {
	struct sm_ring_ctl *ctl;
	char *data;
	uint64_t size;
	uint64_t mask;
	uint64_t max_recs;   /* both: ctl->max_recs, or UINT64_MAX for no limit */
	uint64_t window;     /* both: ctl->window */
	uint32_t bit;        /* both: ctl->inbox_bit, below SM_INBOX_BITS */
	uint64_t head;       /* producer: next write position */
	uint64_t tail_cache; /* producer: last tail seen */
	uint64_t clear;      /* producer: lines from head to here have stamp word 0 */
	uint64_t last_size;  /* producer: bytes of the last record published */
	uint64_t pub_recs;   /* producer: records published */
	uint64_t rel_cache;  /* producer: last rel_recs seen */
	uint64_t read;       /* consumer: next record to consume */
	uint64_t tail;       /* consumer: oldest record not yet released */
	uint64_t rel_recs;   /* consumer: records released */
	uint64_t cons_recs;  /* consumer: records consumed */
	uint64_t pad_read;   /* consumer: PAD bytes read past (monotonic) */
	uint64_t pad_tail;   /* consumer: PAD bytes tail moved past (monotonic) */
	uint64_t stop_tail;  /* consumer: tail when consuming last stopped at half the window */
	int hold;            /* consumer: ctl->hold as last stored */
};

/* The stamp of a record at monotonic position pos: odd, so never 0. */
static inline uint32_t sm_ring_stamp(uint64_t pos)
{
	return (uint32_t)(pos >> 6) | 1u;
}

/* Bytes a record with len payload bytes takes. */
static inline uint64_t sm_rec_size(uint64_t len)
{
	return (SM_REC_HDR + len + SM_LINE - 1) & ~(uint64_t)(SM_LINE - 1);
}

/* The payload of a record. */
static inline void *sm_rec_payload(struct sm_rec *rec)
{
	return (char *)rec + SM_REC_HDR;
}

/*
 * Data size of a ring that holds count records of max_len payload bytes
 * (plus one for the padding lost at a wrap), rounded up to a power of two,
 * but no more than SM_RING_CACHE_SIZE or SM_RING_MIN_RECS records of
 * max_len, whichever is larger.  The producer walks the whole ring, and a
 * ring larger than the cache makes every record's copy a miss (a 64 KiB
 * stream ran at 40 GB/s through a 1 MiB ring, under 20 through 8 MiB):
 * with many or large records, bytes rather than count bound what is in
 * flight.  0 if the size exceeds SM_RING_MAX_SIZE.
 */
uint64_t sm_ring_size_for(uint32_t count, uint32_t max_len);

/*
 * The window of a ring of size bytes for records of max_len: the part of
 * it a producer walks while the consumer keeps up.  SM_RING_WINDOW or four
 * records of max_len, whichever is larger, and no more than size.  On a
 * core with a 1 MiB L2, an 8 KiB stream ran at 18 GB/s through a 1 MiB
 * ring, 20 through 256 KiB and 26 through 128 KiB: the ring shares the
 * cache with both processes' own buffers.
 */
uint64_t sm_ring_window_for(uint64_t size, uint32_t max_len);

/* Bytes of a segment holding a ring of data size size. */
static inline uint64_t sm_ring_seg_bytes(uint64_t size)
{
	return SM_RING_CTL_BYTES + size;
}

/*
 * Initialise a fresh (zeroed) segment of sm_ring_seg_bytes(size) bytes.
 * window: a power of two from SM_LINE to size (size: none).
 * max_recs bounds the records in the ring (published and not yet
 * released): the consumer's receive buffer count.  0 = bytes only.
 */
void sm_ring_format(void *seg, uint64_t size, uint64_t window, uint32_t max_recs);

/* The consumer: the ring's bit in its inbox, before the producer attaches. */
static inline void sm_ring_set_bit(void *seg, uint32_t bit)
{
	((struct sm_ring_ctl *)seg)->inbox_bit = bit;
}

/*
 * Attach a view to a segment of seg_bytes bytes; checks magic, version,
 * that the declared size is a power of two that fits, the window one
 * within it, and the inbox bit below SM_INBOX_BITS.  0 or -1.
 */
int sm_ring_attach(struct sm_ring *r, void *seg, uint64_t seg_bytes);

/*
 * Producer: room for a record of len payload bytes?  Writes a PAD record
 * when the record must wrap.  Returns the record to fill (payload at
 * sm_rec_payload()), or NULL when the ring is full (bytes or records).  Nothing is visible
 * to the consumer until sm_ring_commit().
 */
struct sm_rec *sm_ring_reserve(struct sm_ring *r, uint32_t len);

/* Producer: publish the record returned by the last sm_ring_reserve(). */
void sm_ring_commit(struct sm_ring *r, struct sm_rec *rec, uint16_t type, uint32_t len,
                    uint32_t aux);

/*
 * Producer, with nothing to send: make the lines a record like the last
 * one would fill ready to write (cleared, so owned by this cache), so that
 * the next send copies into lines at hand instead of fetching them on the
 * way.  A streaming producer never calls it and never pays for it.
 */
void sm_ring_warm(struct sm_ring *r);

/*
 * Consumer: the next published record, PADs skipped; NULL if none.
 * *bad is set when the record at the read position is malformed (its
 * length runs past the end of the ring); the ring is then unusable.
 */
struct sm_rec *sm_ring_peek(struct sm_ring *r, int *bad);

/*
 * Consumer: may the record sm_ring_peek() returned be consumed now?  Yes
 * while the records consumed and not released (PADs between them aside)
 * span at most half the window (always, in a ring without one).
 * Past that, the caller stops (0) and the application's returns make room;
 * but when it stopped there before and nothing came back since, the
 * application holds records: the producer is told it may use the whole
 * ring (ctl->hold) and the record goes on (2: the caller wakes a producer
 * that waits for space).  The mark drops when the records held back span
 * a quarter of the window again (sm_ring_release).
 */
int sm_ring_may_consume(struct sm_ring *r, const struct sm_rec *rec);

/* Consumer: move past the record returned by sm_ring_peek(); it stays
 * lent until sm_ring_release(). */
void sm_ring_consume(struct sm_ring *r, struct sm_rec *rec);

/* Consumer: give a consumed record back, in any order.  Returns 1 when
 * tail moved (space was freed), else 0. */
int sm_ring_release(struct sm_ring *r, struct sm_rec *rec);

/* Is a record (or a PAD) published at position pos?  Reads the stamp
 * only: any thread may ask, for a hint. */
static inline int sm_ring_ready_at(const struct sm_ring *r, uint64_t pos)
{
	struct sm_rec *rec = (struct sm_rec *)(r->data + (pos & r->mask));

	return atomic_load_explicit(&rec->stamp, memory_order_relaxed) == sm_ring_stamp(pos);
}

/* Consumer: bytes between tail and read (consumed, not all released). */
static inline uint64_t sm_ring_held(const struct sm_ring *r)
{
	return r->read - r->tail;
}

/* Consumer: would a record of len payload bytes find no room now, because
 * of what was consumed and is not yet reclaimed? */
static inline int sm_ring_blocked(const struct sm_ring *r, uint32_t len)
{
	return r->cons_recs - r->rel_recs >= r->max_recs ||
	       r->size - (r->read - r->tail) < 2 * sm_rec_size(len);
}

#endif /* CCI_SM_RING_H */
