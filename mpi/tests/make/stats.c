#include "stats.h"

struct stats global_stats(const double *v, long n, MPI_Comm comm) {
    struct stats local = {0, 1e300, -1e300, n}, global;
    for (long i = 0; i < n; i++) {
        local.sum += v[i];
        if (v[i] < local.min) local.min = v[i];
        if (v[i] > local.max) local.max = v[i];
    }
    MPI_Allreduce(&local.sum, &global.sum, 1, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Allreduce(&local.min, &global.min, 1, MPI_DOUBLE, MPI_MIN, comm);
    MPI_Allreduce(&local.max, &global.max, 1, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(&local.count, &global.count, 1, MPI_LONG, MPI_SUM, comm);
    return global;
}
