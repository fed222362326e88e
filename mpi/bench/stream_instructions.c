/* Instructions per message of small-message streaming through libmpi.so: the window of
 * ../shared/bench/mpi_pingpong.c's `bw` mode (64 MPI_Isend + MPI_Waitall against 64 MPI_Irecv +
 * MPI_Waitall, then a 1-byte acknowledgement), counted by callgrind on both ranks
 * (mpi/bench/stream-instructions.sh). The receiver posts its window and sleeps before its
 * MPI_Waitall so that the sender's window has arrived (in the fastbox and in cells) and the count
 * is the mechanism's, not polling for messages still on their way.
 *
 *   stream_instructions SIZE [WINDOWS]                                                          */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    enum { WINDOW = 64 };
    int size = argc > 1 ? atoi(argv[1]) : 8;
    int windows = argc > 2 ? atoi(argv[2]) : 200;
    int rank;
    MPI_Request req[WINDOW];
    MPI_Status st[WINDOW];
    char ack = 0;
    char *buf = malloc(size > 0 ? size : 1);
    memset(buf, 'a', size > 0 ? size : 1);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < windows; i++) {
        if (rank == 0) {
            for (int w = 0; w < WINDOW; w++) MPI_Isend(buf, size, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(WINDOW, req, st);
            MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < WINDOW; w++) MPI_Irecv(buf, size, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &req[w]);
            usleep(20000); /* the sender's window arrives meanwhile (it runs under callgrind too) */
            MPI_Waitall(WINDOW, req, st);
            MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
        }
    }
    MPI_Finalize();
    free(buf);
    return 0;
}
