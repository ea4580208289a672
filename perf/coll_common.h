/*
 * coll_common.h - what coll (cci) and coll_mpi (Open MPI) share, so that
 * the two sides of perf/coll_compare run the same sizes, iteration counts,
 * data and checks and print the same rows.  No cci and no MPI here.
 */
#ifndef CCI_PERF_COLL_COMMON_H
#define CCI_PERF_COLL_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#define COLL_MAX_SIZES 32

enum coll_op { COLL_ALLREDUCE, COLL_BCAST };
enum coll_poll { COLL_POLL_SPIN, COLL_POLL_YIELD, COLL_POLL_BLOCK };

struct coll_opts {
	enum coll_op op;
	bool rma;                  /* coll: -m rma */
	enum coll_poll poll;       /* coll: -p */
	uint64_t sizes[COLL_MAX_SIZES];
	unsigned nsizes;
	uint64_t max_size;
	uint32_t iters;            /* 0: from budget */
	uint64_t budget;           /* bytes per size when iters is 0 */
	uint64_t rab_from;         /* coll: allreduce by reduce-scatter from here */
	uint64_t chunk;            /* coll: rma chunk */
	unsigned timeout_s;
};

/* Parses argv (see coll.c's usage); cci_side admits -m, -p, -R and -C. */
void coll_parse(struct coll_opts *o, int argc, char **argv, bool cci_side);

const char *coll_op_name(enum coll_op op);

/* Timed calls for size: -i, or budget / size within [20, 10000]. */
uint32_t coll_iters(const struct coll_opts *o, uint64_t size);

/* Fresh values of a round: allreduce: in[j] = rank + 1 + (j + round) % 7,
 * out scrambled; bcast: rank 0's out holds the round's bytes, the others'
 * out their complement. */
void coll_fill(enum coll_op op, int rank, uint32_t round, unsigned char *in,
	       unsigned char *out, uint64_t size);

/* Values of out that differ from the exact result of the round. */
uint64_t coll_verify(enum coll_op op, int n, uint32_t round, const unsigned char *out,
		     uint64_t size);

void coll_print_header(const struct coll_opts *o, const char *impl, int n,
		       const char *transport);
void coll_print_row(const struct coll_opts *o, const char *impl, int n, uint64_t size,
		    uint32_t iters, double us, uint64_t bad);

/* Reduce-scatter by recursive halving over n ranks (a power of two): the
 * byte offset of the part of the vector rank keeps after step k (k = 0: the
 * half away from its partner at distance n/2; size >> (k + 1) bytes). */
uint64_t rs_region_start(int rank, int n, uint64_t size, int k);

/* Whether a and b differ in exactly one bit: the partners of recursive
 * doubling and halving, and the edges of the binomial tree from rank 0. */
bool is_partner(int a, int b);

#endif
