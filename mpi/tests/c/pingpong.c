/* Ping-pong between ranks 0 and 1 (any others idle): messages of 0 bytes to 1 MiB (past the eager
 * limit: rendezvous), checked byte for byte in both directions; MPI_Ssend; MPI_Sendrecv; probes and
 * MPI_Get_count; the status of every receive. Prints "OK pingpong <rank>". */
#include "check.h"

static unsigned char pattern(int round, int size, int i) { return (unsigned char)(round * 31 + size * 7 + i * 13); }

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size >= 2, "needs 2 ranks, has %d", size);
    static const int sizes[] = {0, 1, 8, 100, 216, 217, 1000, 4096, 16384, 40000, 65536, 65537, 300000, 1 << 20};
    enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]) };
    enum { MAX = 1 << 20 };
    unsigned char *buf = xmalloc(MAX);
    int peer = 1 - rank;
    if (rank < 2) {
        for (int round = 0; round < 3; round++) {
            for (int s = 0; s < NSIZES; s++) {
                int n = sizes[s];
                MPI_Status st;
                if (rank == 0) {
                    for (int i = 0; i < n; i++) buf[i] = pattern(round, n, i);
                    if (s % 2) {
                        OK(MPI_Ssend(buf, n, MPI_BYTE, peer, s, MPI_COMM_WORLD));
                    } else {
                        OK(MPI_Send(buf, n, MPI_BYTE, peer, s, MPI_COMM_WORLD));
                    }
                    memset(buf, 0, (size_t)n);
                    OK(MPI_Recv(buf, n, MPI_BYTE, peer, s + 100, MPI_COMM_WORLD, &st));
                } else {
                    /* Probe first, then receive exactly the advertised size. */
                    int flag = 0, count = -1;
                    OK(MPI_Probe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                    CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == s, "probe: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
                    OK(MPI_Get_count(&st, MPI_BYTE, &count));
                    CHECK(count == n, "probe count %d, expected %d", count, n);
                    OK(MPI_Iprobe(peer, s, MPI_COMM_WORLD, &flag, &st));
                    CHECK(flag == 1, "iprobe after probe");
                    OK(MPI_Recv(buf, MAX, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                    CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == s, "recv: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
                    OK(MPI_Get_count(&st, MPI_BYTE, &count));
                    CHECK(count == n, "recv count %d, expected %d", count, n);
                    for (int i = 0; i < n; i++) CHECK(buf[i] == pattern(round, n, i), "byte %d of %d", i, n);
                    OK(MPI_Send(buf, n, MPI_BYTE, peer, s + 100, MPI_COMM_WORLD));
                }
                if (rank == 0)
                    for (int i = 0; i < n; i++) CHECK(buf[i] == pattern(round, n, i), "echo byte %d of %d", i, n);
            }
        }
        /* Counts in elements of larger types. */
        double d[1000];
        for (int i = 0; i < 1000; i++) d[i] = rank == 0 ? i * 0.5 : -1;
        MPI_Status st;
        if (rank == 0) {
            OK(MPI_Send(d, 1000, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD));
        } else {
            int count;
            OK(MPI_Recv(d, 1000, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
            CHECK(count == 1000, "doubles %d", count);
            OK(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(count == 2000, "as ints %d", count);
            OK(MPI_Get_count(&st, MPI_LONG_LONG, &count));
            CHECK(count == 1000, "as long longs %d", count);
            for (int i = 0; i < 1000; i++) CHECK(d[i] == i * 0.5, "double %d", i);
        }
        /* A count that is not a whole number of elements. */
        if (rank == 0) {
            OK(MPI_Send(d, 3, MPI_BYTE, 1, 8, MPI_COMM_WORLD));
        } else {
            int count;
            OK(MPI_Recv(d, 8, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(count == MPI_UNDEFINED, "3 bytes as ints: %d", count);
        }
        /* Sendrecv: both send and receive at once. */
        int out[4] = {rank, rank + 1, rank + 2, rank + 3}, in[4] = {0};
        OK(MPI_Sendrecv(out, 4, MPI_INT, peer, 11, in, 4, MPI_INT, peer, 11, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 11, "sendrecv status");
        for (int i = 0; i < 4; i++) CHECK(in[i] == peer + i, "sendrecv %d", i);
        /* MPI_PROC_NULL: nothing happens, the status says so. */
        OK(MPI_Send(out, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
        OK(MPI_Recv(in, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG, "proc null status");
        int count;
        OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 0, "proc null count %d", count);
    }
    free(buf);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK pingpong %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
