/* Each rank holds 1000 values of a sequence; rank 0 prints the global statistics. */
#include <stdio.h>
#include "stats.h"

int main(int argc, char **argv) {
    int rank, size;
    double v[1000];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 1000; i++) v[i] = rank * 1000 + i;
    struct stats s = global_stats(v, 1000, MPI_COMM_WORLD);
    if (rank == 0) printf("stats: count %ld sum %.0f min %.0f max %.0f\n", s.count, s.sum, s.min, s.max);
    MPI_Finalize();
    return 0;
}
