/* Persistent collectives in place: MPI_Gather_init, MPI_Scatter_init, MPI_Gatherv_init,
 * MPI_Scatterv_init with MPI_IN_PLACE at the root and MPI_Alltoallv_init in place, the ignored
 * side given as count 0 and MPI_DATATYPE_NULL (as mpi4py does); each started 3 times with new
 * data, results checked. Prints "OK coll_persistent_inplace <rank>". */
#include <stdlib.h>

#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int root = size - 1;
    int *all = malloc(sizeof(int) * (size_t)size), *counts = malloc(sizeof(int) * (size_t)size);
    int *displs = malloc(sizeof(int) * (size_t)size), mine = -1;
    for (int i = 0; i < size; i++) counts[i] = 1, displs[i] = i;
    MPI_Request q[5];
    int at_root = rank == root;
    /* Gather: the root's contribution is already in place. */
    OK(MPI_Gather_init(at_root ? MPI_IN_PLACE : &mine, at_root ? 0 : 1, at_root ? MPI_DATATYPE_NULL : MPI_INT,
                       all, 1, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]));
    OK(MPI_Gatherv_init(at_root ? MPI_IN_PLACE : &mine, at_root ? 0 : 1, at_root ? MPI_DATATYPE_NULL : MPI_INT,
                        all, counts, displs, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]));
    for (int round = 0; round < 3; round++) {
        mine = 100 * round + rank;
        if (at_root) all[root] = 100 * round + root;
        OK(MPI_Start(&q[0]));
        OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
        for (int i = 0; at_root && i < size; i++) CHECK(all[i] == 100 * round + i, "gather %d: %d", i, all[i]);
        if (at_root) all[root] = 100 * round + root;
        OK(MPI_Start(&q[1]));
        OK(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
        for (int i = 0; at_root && i < size; i++) CHECK(all[i] == 100 * round + i, "gatherv %d: %d", i, all[i]);
    }
    /* Scatter: the root keeps its own piece in place. */
    OK(MPI_Scatter_init(all, 1, MPI_INT, at_root ? MPI_IN_PLACE : &mine, at_root ? 0 : 1,
                        at_root ? MPI_DATATYPE_NULL : MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &q[2]));
    int minev = -1;
    OK(MPI_Scatterv_init(all, counts, displs, MPI_INT, at_root ? MPI_IN_PLACE : &minev, at_root ? 0 : 1,
                         at_root ? MPI_DATATYPE_NULL : MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &q[3]));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; at_root && i < size; i++) all[i] = 7 * round + i;
        mine = minev = -1;
        OK(MPI_Startall(2, &q[2]));
        OK(MPI_Wait(&q[2], MPI_STATUS_IGNORE));
        CHECK(at_root || mine == 7 * round + rank, "scatter: %d", mine);
        OK(MPI_Wait(&q[3], MPI_STATUS_IGNORE));
        CHECK(at_root || minev == 7 * round + rank, "scatterv: %d", minev);
    }
    /* Alltoallv in place: the send side is ignored. */
    int *buf = malloc(sizeof(int) * (size_t)size);
    OK(MPI_Alltoallv_init(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, buf, counts, displs, MPI_INT, MPI_COMM_WORLD,
                          MPI_INFO_NULL, &q[4]));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < size; i++) buf[i] = 1000 * round + 10 * rank + i;
        OK(MPI_Start(&q[4]));
        OK(MPI_Wait(&q[4], MPI_STATUS_IGNORE));
        for (int i = 0; i < size; i++)
            CHECK(buf[i] == 1000 * round + 10 * i + rank, "alltoallv from %d: %d", i, buf[i]);
    }
    for (int i = 0; i < 5; i++) OK(MPI_Request_free(&q[i]));
    free(all), free(counts), free(displs), free(buf);
    OK(MPI_Finalize());
    printf("OK coll_persistent_inplace %d\n", rank);
    return 0;
}
