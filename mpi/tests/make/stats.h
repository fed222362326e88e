/* Global statistics of a distributed vector. */
#ifndef STATS_H
#define STATS_H
#include <mpi.h>

struct stats {
    double sum, min, max;
    long count;
};

struct stats global_stats(const double *v, long n, MPI_Comm comm);
#endif
