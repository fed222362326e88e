/* A dead peer (run with nemesis-run --keep-going): rank 1 exits without finalizing; rank 0, under
 * MPI_ERRORS_RETURN, gets MPIX_ERR_PROC_FAILED from a receive and a send naming it. Prints
 * "OK peer_death 0". */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, x = 0;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) _exit(0);
    MPI_Status st;
    FAILS_WITH(MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &st), MPIX_ERR_PROC_FAILED);
    FAILS_WITH(MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), MPIX_ERR_PROC_FAILED);
    printf("OK peer_death %d\n", rank);
    fflush(stdout);
    _exit(0);
}
