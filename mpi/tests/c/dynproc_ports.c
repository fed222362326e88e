/* Ports between the two halves of MPI_COMM_WORLD (ranks below size/2, and the rest): the low
 * half's rank 0 opens a port and MPI_Comm_accept's on it over the low half, the high half's
 * rank 0 gets the name (1: in a message over MPI_COMM_WORLD; 2: from MPI_Lookup_name after the
 * low root's MPI_Publish_name) and MPI_Comm_connect's over the high half. Each time: sizes,
 * point-to-point between the roots both ways, an intercommunicator Allreduce (each side gets the
 * other's sum of world ranks), MPI_Intercomm_merge (low half first: merged ranks checked),
 * MPI_Comm_disconnect. Also: publishing a name twice is MPI_ERR_SERVICE, looking it up after
 * MPI_Unpublish_name MPI_ERR_NAME, MPI_Close_port twice MPI_ERR_PORT. Needs 2 ranks (one
 * prints OK and stops). Prints "OK dynproc_ports <rank>". */
#include "check.h"

static int rank, size;

static void exercise(MPI_Comm ic, int low, int cut) {
    int lsize, rsize, lrank;
    OK(MPI_Comm_size(ic, &lsize));
    OK(MPI_Comm_remote_size(ic, &rsize));
    OK(MPI_Comm_rank(ic, &lrank));
    CHECK(lsize == (low ? cut : size - cut) && rsize == size - lsize, "sizes %d + %d", lsize, rsize);
    if (lrank == 0) {
        int out = low ? 11 : 22, in = 0;
        OK(MPI_Sendrecv(&out, 1, MPI_INT, 0, 5, &in, 1, MPI_INT, 0, 5, ic, MPI_STATUS_IGNORE));
        CHECK(in == (low ? 22 : 11), "roots exchanged %d", in);
    }
    int sum = 0, want = 0;
    for (int r = 0; r < size; r++)
        if ((r < cut) != low) want += r;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ic));
    CHECK(sum == want, "allreduce %d, expected %d", sum, want);
    MPI_Comm merged;
    OK(MPI_Intercomm_merge(ic, low ? 0 : 1, &merged));
    int mrank;
    OK(MPI_Comm_rank(merged, &mrank));
    CHECK(mrank == rank, "merged rank %d", mrank);
    OK(MPI_Comm_free(&merged));
    OK(MPI_Comm_disconnect(&ic));
    CHECK(ic == MPI_COMM_NULL, "disconnect");
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (size < 2) {
        printf("OK dynproc_ports %d\n", rank);
        OK(MPI_Finalize());
        return 0;
    }
    int cut = size / 2, low = rank < cut;
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half));
    char port[MPI_MAX_PORT_NAME] = "";
    const char *service = "nemesis-dynproc-ports";
    for (int round = 1; round <= 2; round++) {
        MPI_Comm ic;
        if (low) {
            if (rank == 0) {
                OK(MPI_Open_port(MPI_INFO_NULL, port));
                if (round == 1)
                    OK(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, cut, 1, MPI_COMM_WORLD));
                else {
                    OK(MPI_Publish_name(service, MPI_INFO_NULL, port));
                    FAILS_WITH(MPI_Publish_name(service, MPI_INFO_NULL, port), MPI_ERR_SERVICE);
                }
            }
            if (round == 2) OK(MPI_Barrier(MPI_COMM_WORLD));
            OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &ic));
        } else {
            if (rank == cut && round == 1)
                OK(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            if (round == 2) {
                OK(MPI_Barrier(MPI_COMM_WORLD));
                if (rank == cut) OK(MPI_Lookup_name(service, MPI_INFO_NULL, port));
            }
            OK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &ic));
        }
        exercise(ic, low, cut);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) {
            if (round == 2) {
                OK(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
                FAILS_WITH(MPI_Lookup_name(service, MPI_INFO_NULL, port), MPI_ERR_NAME);
            }
            OK(MPI_Close_port(port));
            FAILS_WITH(MPI_Close_port(port), MPI_ERR_PORT);
        }
    }
    OK(MPI_Comm_free(&half));
    printf("OK dynproc_ports %d\n", rank);
    fflush(stdout);
    OK(MPI_Finalize());
    return 0;
}
