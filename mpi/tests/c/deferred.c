/* Deferred receives: MPI_Irecv of a small message from a rank of the node is kept, not posted, until
 * MPI_Waitall takes the message straight from the fastbox, or another call posts it first
 * (mpi/src/state.rs, `State::deferred`). Rank 0 receives, rank 1 sends (others join the barriers
 * only); every message carries its number, so one taken by the wrong receive fails a check. The
 * receiver makes no MPI call between its MPI_Irecv calls and the call under test (a sleep lets the
 * messages arrive), so the receives are still deferred there:
 *  - MPI_Waitall with the requests in reverse order (matching stays in posting order);
 *  - a blocking MPI_Recv, an MPI_ANY_SOURCE MPI_Irecv and an MPI_Iprobe after a deferred receive
 *    of the same messages (the deferred receive matches first; the probe finds nothing);
 *  - MPI_Ssend both ways with a deferred receive each (each Ssend needs the other's receive
 *    posted: no deadlock);
 *  - truncation (MPI_ERR_IN_STATUS, MPI_ERR_TRUNCATE in the status), MPI_Cancel, MPI_Request_free;
 *  - a message that arrives only after MPI_Waitall began; a window of 64 (OSU's pattern) half in
 *    the fastbox, half later; MPI_ANY_TAG; an MPI_Isend and a deferred receive in one MPI_Waitall;
 *    MPI_STATUSES_IGNORE.
 * Run with NEMESIS_DEFER_RECV=0 too (the same results without deferral). Prints "OK deferred <rank>". */
#include "check.h"
#include <unistd.h>

enum { SLEEP_US = 20000, WINDOW = 64 };


static void expect(int got, int want, const char *what) { CHECK(got == want, "%s: got %d, want %d", what, got, want); }

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size >= 2, "needs 2 ranks, has %d", size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Status st, sts[WINDOW];
    warm_up_pair(rank, 0);

    /* 1. Waitall in reverse order. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int a = -1, b = -1;
        MPI_Request r[2];
        OK(MPI_Irecv(&a, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Irecv(&b, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &r[0]));
        usleep(SLEEP_US);
        OK(MPI_Waitall(2, r, sts));
        expect(a, 1, "reverse Waitall, first receive");
        expect(b, 2, "reverse Waitall, second receive");
        CHECK(sts[0].MPI_SOURCE == 1 && sts[0].MPI_TAG == 1 && sts[1].MPI_SOURCE == 1, "statuses");
    } else if (rank == 1) {
        for (int n = 1; n <= 2; n++) OK(MPI_Send(&n, 1, MPI_INT, 0, 1, MPI_COMM_WORLD));
    }

    /* 2. A blocking receive after a deferred one. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int a = -1, b = -1;
        MPI_Request r;
        OK(MPI_Irecv(&a, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &r));
        usleep(SLEEP_US);
        OK(MPI_Recv(&b, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &st));
        OK(MPI_Wait(&r, &st));
        expect(a, 1, "deferred receive before a blocking one");
        expect(b, 2, "blocking receive after a deferred one");
    } else if (rank == 1) {
        for (int n = 1; n <= 2; n++) OK(MPI_Send(&n, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
    }

    /* 3. An MPI_ANY_SOURCE receive after a deferred one, waited for first. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int a = -1, b = -1;
        MPI_Request r[2];
        OK(MPI_Irecv(&a, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Irecv(&b, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &r[0]));
        usleep(SLEEP_US);
        OK(MPI_Waitall(2, r, sts));
        expect(a, 1, "deferred receive before an ANY_SOURCE one");
        expect(b, 2, "ANY_SOURCE receive after a deferred one");
    } else if (rank == 1) {
        for (int n = 1; n <= 2; n++) OK(MPI_Send(&n, 1, MPI_INT, 0, 3, MPI_COMM_WORLD));
    }

    /* 4. A probe finds nothing: the message belongs to the deferred receive. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int a = -1, flag = -1;
        MPI_Request r;
        OK(MPI_Irecv(&a, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, &r));
        usleep(SLEEP_US);
        OK(MPI_Iprobe(1, 4, MPI_COMM_WORLD, &flag, &st));
        CHECK(flag == 0, "MPI_Iprobe found the message of a receive started before it");
        OK(MPI_Wait(&r, &st));
        expect(a, 1, "deferred receive after a probe");
    } else if (rank == 1) {
        int n = 1;
        OK(MPI_Send(&n, 1, MPI_INT, 0, 4, MPI_COMM_WORLD));
    }

    /* 5. MPI_Ssend both ways, each with a deferred receive for the other's message. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank < 2) {
        int in = -1, out = 50 + rank;
        MPI_Request r;
        OK(MPI_Irecv(&in, 1, MPI_INT, 1 - rank, 5, MPI_COMM_WORLD, &r));
        OK(MPI_Ssend(&out, 1, MPI_INT, 1 - rank, 5, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, &st));
        expect(in, 51 - rank, "Ssend exchange");
    }

    /* 6. Truncation. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        char small[4];
        int after = -1;
        MPI_Request r[1];
        OK(MPI_Irecv(small, 4, MPI_BYTE, 1, 6, MPI_COMM_WORLD, &r[0]));
        usleep(SLEEP_US);
        FAILS_WITH(MPI_Waitall(1, r, sts), MPI_ERR_IN_STATUS);
        CHECK(class_of(sts[0].MPI_ERROR) == MPI_ERR_TRUNCATE, "status error %d", sts[0].MPI_ERROR);
        CHECK(r[0] == MPI_REQUEST_NULL, "a failed request is freed");
        OK(MPI_Recv(&after, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, &st));
        expect(after, 2, "the message after a truncated one");
    } else if (rank == 1) {
        double big = 1.0;
        int n = 2;
        OK(MPI_Send(&big, 8, MPI_BYTE, 0, 6, MPI_COMM_WORLD));
        OK(MPI_Send(&n, 1, MPI_INT, 0, 6, MPI_COMM_WORLD));
    }

    /* 7. Cancel, and Request_free (the freed receive still takes the first message). */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int a = -1, b = -1, c = -1, cancelled = -1;
        MPI_Request r;
        OK(MPI_Irecv(&a, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &r));
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Test_cancelled(&st, &cancelled));
        CHECK(cancelled == 1, "a deferred receive is cancelled");
        OK(MPI_Irecv(&b, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &r));
        OK(MPI_Request_free(&r));
        OK(MPI_Recv(&c, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &st));
        expect(c, 2, "the receive after a freed one");
        expect(b, 1, "the freed receive's message");
        expect(a, -1, "the cancelled receive's buffer");
    } else if (rank == 1) {
        for (int n = 1; n <= 2; n++) OK(MPI_Send(&n, 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
    }

    /* 8. A window of 64, the second half sent only after the receiver's MPI_Waitall began; a
     * message under MPI_ANY_TAG; MPI_STATUSES_IGNORE. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int v[WINDOW];
        MPI_Request r[WINDOW];
        for (int k = 0; k < WINDOW; k++) {
            v[k] = -1;
            OK(MPI_Irecv(&v[k], 1, MPI_INT, 1, k == WINDOW - 1 ? MPI_ANY_TAG : 8, MPI_COMM_WORLD, &r[k]));
        }
        usleep(SLEEP_US);
        OK(MPI_Waitall(WINDOW, r, sts));
        for (int k = 0; k < WINDOW; k++) expect(v[k], k, "window");
        CHECK(sts[WINDOW - 1].MPI_TAG == 9, "ANY_TAG status tag %d", sts[WINDOW - 1].MPI_TAG);
        for (int k = 0; k < WINDOW; k++) OK(MPI_Irecv(&v[k], 1, MPI_INT, 1, 10, MPI_COMM_WORLD, &r[k]));
        OK(MPI_Waitall(WINDOW, r, MPI_STATUSES_IGNORE));
        for (int k = 0; k < WINDOW; k++) expect(v[k], 100 + k, "second window");
    } else if (rank == 1) {
        for (int k = 0; k < WINDOW / 2; k++) OK(MPI_Send(&k, 1, MPI_INT, 0, 8, MPI_COMM_WORLD));
        usleep(2 * SLEEP_US);
        for (int k = WINDOW / 2; k < WINDOW; k++)
            OK(MPI_Send(&k, 1, MPI_INT, 0, k == WINDOW - 1 ? 9 : 8, MPI_COMM_WORLD));
        for (int k = 0; k < WINDOW; k++) {
            int n = 100 + k;
            OK(MPI_Send(&n, 1, MPI_INT, 0, 10, MPI_COMM_WORLD));
        }
    }

    /* 9. An MPI_Isend and a deferred receive in one MPI_Waitall, both ways. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank < 2) {
        int in = -1, out = 90 + rank;
        MPI_Request r[2];
        OK(MPI_Irecv(&in, 1, MPI_INT, 1 - rank, 11, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Isend(&out, 1, MPI_INT, 1 - rank, 11, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Waitall(2, r, sts));
        expect(in, 91 - rank, "Isend and deferred receive");
    }

    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK deferred %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
