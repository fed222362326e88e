/* MPI_Comm_join over TCP sockets on 127.0.0.1 between the ranks of each pair (2k, 2k+1): the
 * even rank listens on a port chosen by the kernel and sends its number to the odd one, which
 * connects; both join. The intercommunicator has one process on each side: the pair swaps world
 * ranks over it, an Allreduce gives each the other's, and it is disconnected. A negative socket
 * is MPI_ERR_ARG. With an odd number of ranks the last one only checks the error. Prints
 * "OK dynproc_join <rank>". */
#include "check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm ic = MPI_COMM_NULL;
    FAILS_WITH(MPI_Comm_join(-1, &ic), MPI_ERR_ARG);
    int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
    if (peer < size) {
        int fd;
        if (rank % 2 == 0) {
            int l = socket(AF_INET, SOCK_STREAM, 0);
            CHECK(l >= 0, "socket");
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0, "bind");
            CHECK(listen(l, 1) == 0, "listen");
            socklen_t len = sizeof a;
            CHECK(getsockname(l, (struct sockaddr *)&a, &len) == 0, "getsockname");
            int port = ntohs(a.sin_port);
            OK(MPI_Send(&port, 1, MPI_INT, peer, 9, MPI_COMM_WORLD));
            /* Waiting outside MPI, MPI keeps progressing (the port's message may still be on
             * its way to another node). */
            struct pollfd pfd = {l, POLLIN, 0};
            int flag;
            while (poll(&pfd, 1, 1) == 0) OK(MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            fd = accept(l, NULL, NULL);
            CHECK(fd >= 0, "accept");
            close(l);
        } else {
            int port;
            OK(MPI_Recv(&port, 1, MPI_INT, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {0};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons(port);
            CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
        }
        OK(MPI_Comm_join(fd, &ic));
        close(fd);
        int rsize, got = -1;
        OK(MPI_Comm_remote_size(ic, &rsize));
        CHECK(rsize == 1, "remote size %d", rsize);
        OK(MPI_Sendrecv(&rank, 1, MPI_INT, 0, 4, &got, 1, MPI_INT, 0, 4, ic, MPI_STATUS_IGNORE));
        CHECK(got == peer, "got %d from the other end, expected %d", got, peer);
        got = -1;
        OK(MPI_Allreduce(&rank, &got, 1, MPI_INT, MPI_SUM, ic));
        CHECK(got == peer, "allreduce %d", got);
        OK(MPI_Comm_disconnect(&ic));
    }
    printf("OK dynproc_join %d\n", rank);
    fflush(stdout);
    OK(MPI_Finalize());
    return 0;
}
