/* Every rank spawns at once on MPI_COMM_SELF (several spawns in flight in the launcher, their
 * children starting while another spawn's are not yet published, as mpi4py's test_spawn does),
 * three rounds: each child gets its parent, which sends it its rank and receives it back plus
 * one. Prints "OK spawn_self <rank>" in the parents. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    MPI_Comm parent;
    OK(MPI_Comm_get_parent(&parent));
    if (parent != MPI_COMM_NULL) {
        int v, rsize;
        OK(MPI_Comm_remote_size(parent, &rsize));
        CHECK(rsize == 1, "one parent, not %d", rsize);
        OK(MPI_Recv(&v, 1, MPI_INT, 0, 5, parent, MPI_STATUS_IGNORE));
        v += 1;
        OK(MPI_Send(&v, 1, MPI_INT, 0, 6, parent));
        OK(MPI_Comm_disconnect(&parent));
        OK(MPI_Finalize());
        return 0;
    }
    for (int round = 0; round < 3; round++) {
        MPI_Comm child;
        int errs[2] = {-1, -1};
        OK(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_SELF, &child, errs));
        CHECK(errs[0] == MPI_SUCCESS && errs[1] == MPI_SUCCESS, "errcodes %d %d", errs[0], errs[1]);
        for (int c = 0; c < 2; c++) {
            int v = 1000 * rank + 10 * round + c, back = -1;
            OK(MPI_Send(&v, 1, MPI_INT, c, 5, child));
            OK(MPI_Recv(&back, 1, MPI_INT, c, 6, child, MPI_STATUS_IGNORE));
            CHECK(back == v + 1, "child %d answered %d to %d", c, back, v);
        }
        OK(MPI_Comm_disconnect(&child));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    printf("OK spawn_self %d\n", rank);
    return 0;
}
