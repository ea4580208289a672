/*
 * coll_mpi - MPI_Allreduce (MPI_SUM of doubles) and MPI_Bcast (from rank 0)
 * timed exactly as coll times ours: the same sizes, iterations, warm-up,
 * barrier, data and check (coll_common.c), and the same rows.  The other
 * side of perf/coll_compare.
 *
 * usage: mpirun -np N coll_mpi -o allreduce|bcast [-S sizes] [-i iters] [-B bytes]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_common.h"

static struct coll_opts o;
static unsigned char *in, *out;

static void run_op(uint64_t size)
{
	if (o.op == COLL_BCAST)
		MPI_Bcast(out, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
	else
		MPI_Allreduce(in, out, (int)(size / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
	int rank, n, len;
	char lib[MPI_MAX_LIBRARY_VERSION_STRING], *nl;
	uint32_t round = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	coll_parse(&o, argc, argv, false);
	if (posix_memalign((void **)&in, 4096, o.max_size) ||
	    posix_memalign((void **)&out, 4096, o.max_size)) {
		fprintf(stderr, "coll_mpi: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	MPI_Get_library_version(lib, &len);
	if ((nl = strpbrk(lib, ",\n")))
		*nl = '\0';
	if (rank == 0)
		coll_print_header(&o, "mpi", n, lib);
	for (unsigned s = 0; s < o.nsizes; s++) {
		uint64_t size = o.sizes[s], bad, allbad;
		uint32_t iters = coll_iters(&o, size), warm = iters / 10 + 1;
		double t0, us, maxus;

		coll_fill(o.op, rank, ++round, in, out, size);
		for (uint32_t i = 0; i < warm; i++)
			run_op(size);
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (uint32_t i = 0; i < iters; i++)
			run_op(size);
		us = (MPI_Wtime() - t0) * 1e6 / iters;
		MPI_Allreduce(&us, &maxus, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		coll_fill(o.op, rank, round, in, out, size);
		run_op(size);
		bad = coll_verify(o.op, n, round, out, size);
		MPI_Allreduce(&bad, &allbad, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
		if (rank == 0)
			coll_print_row(&o, "mpi", n, size, iters, maxus, allbad);
		if (allbad) {
			if (rank == 0)
				fprintf(stderr, "coll_mpi: %s of %lu bytes: %lu wrong values\n",
					coll_op_name(o.op), (unsigned long)size,
					(unsigned long)allbad);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	free(in);
	free(out);
	MPI_Finalize();
	return EXIT_SUCCESS;
}
