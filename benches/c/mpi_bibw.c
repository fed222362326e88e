/* Bidirectional streaming bandwidth through the standard MPI API only (OSU's osu_bibw), the companion of
 * shared/bench/mpi_pingpong.c's "bw": the same window of 64, sizes, iterations and warm-up, so that every MPI
 * (this project's mpi/bin/mpicc, Debian's mpicc.openmpi or mpicc.mpich) and nemesis-bench's own rank programs
 * (workload `bibw`) are compared like for like.
 * Usage (2 ranks): mpi_bibw bibw [max_bytes]
 *   bibw: each window, both ranks post 64 MPI_Irecv, then 64 MPI_Isend, then one MPI_Waitall of all 128;
 *         prints "bibw SIZE MB/s" per size (1 ... max), counting the bytes of both directions. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW = 64 };

static double bibandwidth(int peer, char *out, char *in, int size, int iters, int skip) {
    MPI_Request req[2 * WINDOW];
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + skip; i++) {
        if (i == skip) t0 = MPI_Wtime();
        for (int w = 0; w < WINDOW; w++) MPI_Irecv(in, size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[w]);
        for (int w = 0; w < WINDOW; w++) MPI_Isend(out, size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[WINDOW + w]);
        MPI_Waitall(2 * WINDOW, req, MPI_STATUSES_IGNORE);
    }
    return 2.0 * size * WINDOW * iters / (MPI_Wtime() - t0) / 1e6;
}

int main(int argc, char **argv) {
    int rank, nprocs;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs != 2) {
        if (rank == 0) fprintf(stderr, "needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *mode = argc > 1 ? argv[1] : "bibw";
    if (strcmp(mode, "bibw") != 0) {
        if (rank == 0) fprintf(stderr, "unknown mode %s (only bibw)\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int max = argc > 2 ? atoi(argv[2]) : (1 << 22);
    size_t cap = max > 4096 ? (size_t)max : 4096;
    char *out = aligned_alloc(4096, cap), *in = aligned_alloc(4096, cap);
    if (!out || !in) {
        fprintf(stderr, "out of memory for %d-byte buffers\n", max);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(out, 'a', cap);
    memset(in, 0, cap);
    for (int size = 1; size <= max; size *= 2) {
        long iters = (1L << 30) / (64L * size); /* about 1 GiB per size and direction, as mpi_pingpong.c's bw */
        if (iters > 5000) iters = 5000;
        if (iters < 20) iters = 20;
        double mbs = bibandwidth(1 - rank, out, in, size, (int)iters, (int)(iters / 10 + 1));
        if (rank == 0) {
            printf("bibw %d %.1f\n", size, mbs);
            fflush(stdout);
        }
    }
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
