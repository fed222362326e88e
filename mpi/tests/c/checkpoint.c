/* MPIX_Checkpoint and MPIX_Checkpoint_restore (mpi/src/ft.rs): a fresh process has nothing restored;
 * a checkpoint with a request outstanding fails with MPI_ERR_PENDING (under MPI_ERRORS_RETURN) and
 * loses nothing; checkpoints with none succeed, through the MPIX_ and PMPIX_ names; bad arguments
 * fail with their classes. */
#include "ft_hold.h"

int main(int argc, char **argv) {
    int rank, size;
    ft_init(&argc, &argv, &rank, &size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    void *buf = (void *)1;
    size_t len = 7;
    int restored = 9;
    OK(MPIX_Checkpoint_restore(&buf, &len, &restored));
    CHECK(buf == NULL && len == 0 && restored == 0, "nothing to restore in a fresh job");
    FAILS_WITH(MPIX_Checkpoint_restore(NULL, &len, &restored), MPI_ERR_ARG);
    FAILS_WITH(MPIX_Checkpoint(NULL, 5), MPI_ERR_BUFFER);

    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out = rank, in = -1;
    MPI_Request r;
    OK(MPI_Irecv(&in, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, &r));
    FAILS_WITH(MPIX_Checkpoint(&rank, sizeof rank), MPI_ERR_PENDING);
    OK(MPI_Send(&out, 1, MPI_INT, next, 0, MPI_COMM_WORLD));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in == prev, "received %d from %d", in, prev);

    char state[64];
    for (int g = 0; g < 3; g++) {
        snprintf(state, sizeof state, "rank %d generation %d", rank, g);
        OK(g % 2 ? PMPIX_Checkpoint(state, strlen(state) + 1) : MPIX_Checkpoint(state, strlen(state) + 1));
        OK(MPI_Send(&out, 1, MPI_INT, next, 1, MPI_COMM_WORLD));
        OK(MPI_Recv(&in, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    OK(PMPIX_Checkpoint_restore(&buf, &len, &restored));
    CHECK(restored == 0, "still nothing restored");
    OK(MPIX_Checkpoint(NULL, 0));
    printf("OK checkpoint %d\n", rank);
    MPI_Finalize();
    return 0;
}
