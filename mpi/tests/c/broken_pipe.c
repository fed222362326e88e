/* A remote peer dies and the survivor's next writes go to its closed socket (run with
 * nemesis-run --nodes 2 --keep-going: rank 0 and rank 1 on different nodes, TCP between them).
 * Rank 1 exits without finalizing a little after a barrier, with nothing unread in its socket: its
 * kernel closes the connection with a FIN. Rank 0 does not call MPI for a while (its netmod reads
 * nothing, so it does not learn of the end of stream), then sends to rank 1 again and again: the
 * first write is answered by a reset, the next one fails with EPIPE, which without MSG_NOSIGNAL
 * raises SIGPIPE and kills this C program (a C program does not ignore SIGPIPE as Rust's runtime
 * does). Rank 0 must get MPIX_ERR_PROC_FAILED instead, then a large stream (rendezvous) fails the
 * same way. Prints "OK broken_pipe 0". */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size == 2, "runs on 2 ranks, not %d", size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) {
        /* Rank 0 is out of the barrier by now, and reads nothing until it sends. */
        usleep(300 * 1000);
        _exit(0);
    }
    /* Long enough for rank 1 to be gone and its FIN to have arrived. */
    usleep(800 * 1000);
    int x = 42, sent = 0, rc = MPI_SUCCESS;
    while (sent < 1000 && (rc = MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD)) == MPI_SUCCESS) sent++;
    FAILS_WITH(rc, MPIX_ERR_PROC_FAILED);
    CHECK(sent >= 1, "the first send after the death was refused before any write (%d sent)", sent);
    /* Every later send fails the same way, a large one (rendezvous) included. */
    size_t big = 8u << 20;
    char *buf = xmalloc(big);
    memset(buf, 7, big);
    FAILS_WITH(MPI_Send(buf, (int)big, MPI_CHAR, 1, 1, MPI_COMM_WORLD), MPIX_ERR_PROC_FAILED);
    free(buf);
    printf("OK broken_pipe 0 after %d sends\n", sent);
    fflush(stdout);
    _exit(0);
}
