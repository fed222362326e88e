/* The default handler, MPI_ERRORS_ARE_FATAL: rank 1 sends to a rank that does not exist while
 * rank 0 waits for a message that never comes; the job must end (non-zero) with a message that
 * names the call, the rank and the error class. Never prints "UNREACHABLE". */
#include "check.h"

int main(int argc, char **argv) {
    int rank, x = 0;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == 1) {
        MPI_Send(&x, 1, MPI_INT, 7, 0, MPI_COMM_WORLD);
        printf("UNREACHABLE: MPI_Send returned on rank 1\n");
    } else {
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("UNREACHABLE: MPI_Recv returned on rank 0\n");
    }
    MPI_Finalize();
    return 0;
}
