/* A member of a communicator that uses a shared collective area dies (run with nemesis-run --keep-going): the last
 * rank SIGKILLs itself after two collectives; the others, under MPI_ERRORS_RETURN, get MPIX_ERR_PROC_FAILED from
 * the allreduce, the broadcast from the dead rank and the barrier that wait for it, never a hang (a broadcast from a
 * live root may succeed: its root need not wait).
 * Prints "OK coll_area_death <rank>" on the survivors. */
#include "check.h"
#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, x = 1, y = 0;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(y == size, "allreduce %d", y);
    if (rank == size - 1) raise(SIGKILL);
    FAILS_WITH(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPIX_ERR_PROC_FAILED);
    FAILS_WITH(MPI_Bcast(&x, 1, MPI_INT, size - 1, MPI_COMM_WORLD), MPIX_ERR_PROC_FAILED);
    /* From a live root: the root need not wait for anyone (it may run ahead), and a member that saw its data has
     * it; success or PROC_FAILED, never a hang. */
    int rc = MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS || class_of(rc) == MPIX_ERR_PROC_FAILED, "bcast from a live root returned %d", rc);
    FAILS_WITH(MPI_Barrier(MPI_COMM_WORLD), MPIX_ERR_PROC_FAILED);
    printf("OK coll_area_death %d\n", rank);
    fflush(stdout);
    _exit(0);
}
