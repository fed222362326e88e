/* The fused MPI_Send/MPI_Recv path (straight to and from the fastbox) against its corner cases, on
 * ranks 0 and 1 (any others join the barriers only): every message carries its number, so an overtaking or a
 * message taken by the wrong receive fails a check. Warm-up first (a sender claims its fastbox
 * after 16 messages to a peer), then messages sent before the receiver looks (a barrier between),
 * so that they wait in the fastbox when the receive is called:
 *  - order between fastbox-sized and longer messages (cells) to the same peer, and a blocking send
 *    behind non-blocking sends still waiting for cells;
 *  - a receive when an unexpected message of the same source is already queued, and when an
 *    earlier posted receive matches the message in the fastbox;
 *  - truncation (MPI_ERR_TRUNCATE under MPI_ERRORS_RETURN, the status, the next message intact);
 *  - MPI_ANY_SOURCE and MPI_ANY_TAG; MPI_STATUS_IGNORE and a status; MPI_INT data;
 *  - a message longer than a fastbox slot;
 *  - with 3 ranks, a message of another source waiting unexpected, and a receive posted for another
 *    source, while the fused receive takes its own source's message; an earlier MPI_ANY_SOURCE
 *    receive that must get the message first.
 * Run with fault tolerance on too (every call then takes the general path). Prints "OK fastpath
 * <rank>". */
#include "check.h"
#include <unistd.h>

enum { TAG = 5, BIG = 300, MANY = 100, WAITING = 120, WAITING_LEN = 8192 };

static void send_n(int n, int len, int tag) {
    unsigned char buf[BIG];
    memset(buf, 0, sizeof buf);
    memcpy(buf, &n, sizeof n);
    OK(MPI_Send(buf, len, MPI_BYTE, 1, tag, MPI_COMM_WORLD));
}

static void send_to(int to, int v, int tag) { OK(MPI_Send(&v, 1, MPI_INT, to, tag, MPI_COMM_WORLD)); }

static void recv_n(int n, int len, int tag) {
    unsigned char buf[BIG + 1];
    MPI_Status st;
    int got = -1, count = -1;
    memset(buf, 0xee, sizeof buf);
    OK(MPI_Recv(buf, BIG, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
    memcpy(&got, buf, sizeof got);
    OK(MPI_Get_count(&st, MPI_BYTE, &count));
    CHECK(got == n && count == len && st.MPI_SOURCE == 0 && st.MPI_TAG == tag,
          "message %d of %d bytes, tag %d: got message %d of %d bytes from %d, tag %d", n, len, tag, got, count,
          st.MPI_SOURCE, st.MPI_TAG);
    for (int i = (int)sizeof n; i < len; i++) CHECK(buf[i] == 0, "byte %d of message %d", i, n);
    CHECK(buf[len] == 0xee, "message %d: written past its %d bytes", n, len);
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size >= 2, "needs 2 ranks, has %d", size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    {
        /* Warm-up: both directions claim their fastboxes. (Other ranks only join the barriers.) */
        warm_up_pair(rank, 1);

        /* 1. Fastbox-sized and longer messages (cells) interleaved, sent before the receiver
         * looks: more than the fastbox ring holds, so later small ones go in cells too. */
        if (rank == 0)
            for (int n = 0; n < MANY; n++) send_n(n, n % 3 == 0 ? BIG : 8, TAG);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1)
            for (int n = 0; n < MANY; n++) recv_n(n, n % 3 == 0 ? BIG : 8, TAG);

        /* 2. A blocking send behind non-blocking sends still waiting for cells: it must not
         * overtake them (the receiver sleeps first, so they cannot all go). */
        if (rank == 0) {
            static unsigned char big[WAITING][WAITING_LEN];
            MPI_Request reqs[WAITING];
            for (int n = 0; n < WAITING; n++) {
                memset(big[n], 0, WAITING_LEN);
                memcpy(big[n], &n, sizeof n);
                OK(MPI_Isend(big[n], WAITING_LEN, MPI_BYTE, 1, TAG + 1, MPI_COMM_WORLD, &reqs[n]));
            }
            int last = WAITING;
            OK(MPI_Send(&last, 1, MPI_INT, 1, TAG + 1, MPI_COMM_WORLD));
            OK(MPI_Waitall(WAITING, reqs, MPI_STATUSES_IGNORE));
        } else if (rank == 1) {
            static unsigned char big[WAITING_LEN];
            usleep(100 * 1000);
            for (int n = 0; n <= WAITING; n++) {
                MPI_Status st;
                int got = -1, count = -1;
                OK(MPI_Recv(big, WAITING_LEN, MPI_BYTE, 0, TAG + 1, MPI_COMM_WORLD, &st));
                memcpy(&got, big, sizeof got);
                OK(MPI_Get_count(&st, MPI_BYTE, &count));
                CHECK(got == n && count == (n < WAITING ? WAITING_LEN : (int)sizeof(int)),
                      "behind waiting sends: expected message %d, got %d (%d bytes)", n, got, count);
            }
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));

        /* 3. An unexpected message of the same source queued before the one in the fastbox:
         * tag 10 (1), tag 11 (2), tag 10 (3). Receiving tag 11 first moves message 1 to the
         * unexpected list; the next receive of tag 10 must take it, not message 3. */
        if (rank == 0) {
            send_n(1, 8, 10);
            send_n(2, 8, 11);
            send_n(3, 8, 10);
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            recv_n(2, 8, 11);
            recv_n(1, 8, 10);
            recv_n(3, 8, 10);
        }

        /* 4. A receive posted earlier matches the message in the fastbox: tag 20 (1), tag 21
         * (2); MPI_Irecv(tag 20) before MPI_Recv(MPI_ANY_TAG), which must get message 2. */
        if (rank == 0) {
            send_n(1, 8, 20);
            send_n(2, 8, 21);
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            int a = -1, b[2] = {-1, -1};
            MPI_Request r;
            MPI_Status st;
            unsigned char buf[8];
            OK(MPI_Irecv(buf, 8, MPI_BYTE, 0, 20, MPI_COMM_WORLD, &r));
            OK(MPI_Recv(b, 2, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            MPI_Status ws;
            int rc = MPI_Wait(&r, &ws);
            CHECK(rc == MPI_SUCCESS, "MPI_Wait: class %d, error %d, source %d, tag %d", class_of(rc), ws.MPI_ERROR,
                  ws.MPI_SOURCE, ws.MPI_TAG);
            memcpy(&a, buf, sizeof a);
            CHECK(a == 1 && b[0] == 2 && st.MPI_TAG == 21, "posted receive first: Irecv got %d, Recv got %d tag %d",
                  a, b[0], st.MPI_TAG);
        }

        /* 5. Truncation: 16 bytes into room for 8: MPI_ERR_TRUNCATE, the status names the
         * message; the next message arrives whole. */
        if (rank == 0) {
            send_n(7, 16, 30);
            send_n(8, 8, 30);
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            unsigned char buf[16];
            MPI_Status st;
            memset(buf, 0xee, sizeof buf);
            int rc = MPI_Recv(buf, 8, MPI_BYTE, 0, 30, MPI_COMM_WORLD, &st);
            CHECK(class_of(rc) == MPI_ERR_TRUNCATE, "truncated receive returned class %d", class_of(rc));
            CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 30, "truncated status: source %d tag %d", st.MPI_SOURCE,
                  st.MPI_TAG);
            CHECK(buf[8] == 0xee, "truncated receive wrote past its buffer");
            recv_n(8, 8, 30);
        }

        /* 6. MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_STATUS_IGNORE, MPI_INT counts. */
        if (rank == 0) {
            int v[2] = {41, 42};
            OK(MPI_Send(v, 2, MPI_INT, 1, 40, MPI_COMM_WORLD));
            OK(MPI_Send(v, 1, MPI_INT, 1, 41, MPI_COMM_WORLD));
            OK(MPI_Send(v + 1, 1, MPI_INT, 1, 42, MPI_COMM_WORLD));
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            int v[2] = {0, 0}, count = -1;
            MPI_Status st;
            OK(MPI_Recv(v, 2, MPI_INT, MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(v[0] == 41 && v[1] == 42 && st.MPI_SOURCE == 0 && count == 2, "ANY_SOURCE: %d %d from %d, %d ints",
                  v[0], v[1], st.MPI_SOURCE, count);
            OK(MPI_Recv(v, 2, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            OK(MPI_Get_count(&st, MPI_INT, &count));
            CHECK(v[0] == 41 && st.MPI_TAG == 41 && count == 1, "ANY_TAG: %d, tag %d, %d ints", v[0], st.MPI_TAG, count);
            OK(MPI_Recv(v, 2, MPI_INT, 0, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(v[0] == 42, "STATUS_IGNORE: %d", v[0]);
        }

        /* 7. Longer than a fastbox slot (216 bytes), between short ones. */
        if (rank == 0) {
            send_n(1, 8, 50);
            send_n(2, 217, 50);
            send_n(3, BIG - 1, 50);
            send_n(4, 8, 50);
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            recv_n(1, 8, 50);
            recv_n(2, 217, 50);
            recv_n(3, BIG - 1, 50);
            recv_n(4, 8, 50);
        }

        /* 8. What may wait while the fused receive takes a named source's message from its
         * fastbox: an unexpected message of another source (8a, 3 ranks), a receive posted for
         * another source (8b, 3 ranks); and what must not: a receive posted earlier from
         * MPI_ANY_SOURCE that matches it (8c). */
        if (size >= 3) {
            if (rank == 2) send_to(1, 21, 60);
            if (rank == 1) {
                /* Rank 2's message is in the unexpected list once probed. */
                OK(MPI_Probe(2, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            }
            OK(MPI_Barrier(MPI_COMM_WORLD));
            if (rank == 0) send_n(1, 8, 60);
            OK(MPI_Barrier(MPI_COMM_WORLD));
            if (rank == 1) {
                recv_n(1, 8, 60);
                int v = -1;
                MPI_Status st;
                OK(MPI_Recv(&v, 1, MPI_INT, 2, 60, MPI_COMM_WORLD, &st));
                CHECK(v == 21 && st.MPI_SOURCE == 2, "8a: from rank 2: %d from %d", v, st.MPI_SOURCE);
            }

            if (rank == 0) send_n(2, 8, 61);
            OK(MPI_Barrier(MPI_COMM_WORLD));
            if (rank == 1) {
                int v = -1;
                MPI_Request r;
                MPI_Status st;
                OK(MPI_Irecv(&v, 1, MPI_INT, 2, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
                recv_n(2, 8, 61);
                OK(MPI_Barrier(MPI_COMM_WORLD));
                OK(MPI_Wait(&r, &st));
                CHECK(v == 22 && st.MPI_SOURCE == 2 && st.MPI_TAG == 62, "8b: posted for rank 2: %d from %d, tag %d",
                      v, st.MPI_SOURCE, st.MPI_TAG);
            } else {
                OK(MPI_Barrier(MPI_COMM_WORLD));
                if (rank == 2) send_to(1, 22, 62);
            }
        }
        if (rank == 0) {
            send_n(1, 8, 63);
            send_n(2, 8, 63);
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 1) {
            unsigned char buf[8];
            int a = -1;
            MPI_Request r;
            MPI_Status st;
            OK(MPI_Irecv(buf, 8, MPI_BYTE, MPI_ANY_SOURCE, 63, MPI_COMM_WORLD, &r));
            recv_n(2, 8, 63);
            OK(MPI_Wait(&r, &st));
            memcpy(&a, buf, sizeof a);
            CHECK(a == 1 && st.MPI_SOURCE == 0, "8c: the earlier MPI_ANY_SOURCE receive got message %d from %d", a,
                  st.MPI_SOURCE);
        }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK fastpath %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
