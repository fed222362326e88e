/* MPI_Cancel and matched probes. Receives not yet matched are withdrawn (plain and persistent,
 * specific and wildcard sources), a matched one is not; sends whose messages no receive has
 * matched are withdrawn at the receiver (eager, rendezvous, synchronous, persistent), one that
 * was matched is not, and the withdrawn messages are gone for good; MPI_Test_cancelled reports
 * each outcome. MPI_Mprobe/MPI_Improbe reserve a message that no other receive then sees;
 * MPI_Mrecv/MPI_Imrecv receive it, contiguous or typed, small or large; MPI_MESSAGE_NO_PROC for
 * MPI_PROC_NULL. Runs on 2 ranks (others wait at the barriers). Prints "OK cancel_mprobe <rank>". */
#include "check.h"

enum { SMALL = 64, LARGE = 200000 };

static int cancelled(MPI_Status *st) {
    int c = -1;
    OK(MPI_Test_cancelled(st, &c));
    return c;
}

static void receives(int rank) {
    int x = -1;
    MPI_Request r;
    MPI_Status st;
    if (rank == 1) {
        /* Nothing will ever match these: withdrawn. */
        OK(MPI_Irecv(&x, 1, MPI_INT, 0, 100, MPI_COMM_WORLD, &r));
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        CHECK(cancelled(&st) && r == MPI_REQUEST_NULL, "a posted receive is cancelled");
        OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
        OK(MPI_Cancel(&r));
        int flag = 0;
        while (!flag) OK(MPI_Test(&r, &flag, &st));
        CHECK(cancelled(&st), "a wildcard receive is cancelled");
        /* Persistent: cancelled once, then started again and matched. */
        OK(MPI_Recv_init(&x, 1, MPI_INT, 0, 101, MPI_COMM_WORLD, &r));
        OK(MPI_Start(&r));
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        CHECK(cancelled(&st) && r != MPI_REQUEST_NULL, "a persistent receive is cancelled and stays");
        OK(MPI_Start(&r));
        OK(MPI_Send(NULL, 0, MPI_INT, 0, 102, MPI_COMM_WORLD)); /* "send 101 now" */
        OK(MPI_Wait(&r, &st));
        CHECK(!cancelled(&st) && x == 101, "the restarted receive gets its message: %d", x);
        OK(MPI_Request_free(&r));
        /* A receive that matched is not cancelled. */
        OK(MPI_Irecv(&x, 1, MPI_INT, 0, 103, MPI_COMM_WORLD, &r));
        OK(MPI_Send(NULL, 0, MPI_INT, 0, 104, MPI_COMM_WORLD)); /* "send 103 now" */
        OK(MPI_Recv(NULL, 0, MPI_INT, 0, 105, MPI_COMM_WORLD, &st)); /* 103 came before 105 */
        OK(MPI_Cancel(&r));
        OK(MPI_Wait(&r, &st));
        CHECK(!cancelled(&st) && x == 103, "a matched receive is not cancelled: %d", x);
    } else if (rank == 0) {
        OK(MPI_Recv(NULL, 0, MPI_INT, 1, 102, MPI_COMM_WORLD, &st));
        x = 101;
        OK(MPI_Send(&x, 1, MPI_INT, 1, 101, MPI_COMM_WORLD));
        OK(MPI_Recv(NULL, 0, MPI_INT, 1, 104, MPI_COMM_WORLD, &st));
        x = 103;
        OK(MPI_Send(&x, 1, MPI_INT, 1, 103, MPI_COMM_WORLD));
        OK(MPI_Send(NULL, 0, MPI_INT, 1, 105, MPI_COMM_WORLD));
    }
}

static void sends(int rank) {
    static unsigned char small[SMALL], large[LARGE];
    MPI_Status st;
    if (rank == 0) {
        memset(small, 1, sizeof small);
        memset(large, 2, sizeof large);
        enum { N = 6 };
        MPI_Request r[N];
        OK(MPI_Isend(small, SMALL, MPI_BYTE, 1, 200, MPI_COMM_WORLD, &r[0]));  /* eager */
        OK(MPI_Isend(large, LARGE, MPI_BYTE, 1, 201, MPI_COMM_WORLD, &r[1]));  /* rendezvous */
        OK(MPI_Issend(small, SMALL, MPI_BYTE, 1, 202, MPI_COMM_WORLD, &r[2])); /* synchronous */
        OK(MPI_Send_init(small, SMALL, MPI_BYTE, 1, 203, MPI_COMM_WORLD, &r[3]));
        OK(MPI_Start(&r[3]));                                                 /* persistent */
        OK(MPI_Isend(small, SMALL, MPI_BYTE, 1, 204, MPI_COMM_WORLD, &r[4])); /* will be matched */
        OK(MPI_Ibsend(small, SMALL, MPI_BYTE, 1, 205, MPI_COMM_WORLD, &r[5])); /* buffered: copied */
        OK(MPI_Recv(NULL, 0, MPI_INT, 1, 206, MPI_COMM_WORLD, &st)); /* "204 was received" */
        for (int k = 0; k < N; k++) OK(MPI_Cancel(&r[k]));
        MPI_Status sts[N];
        OK(MPI_Waitall(N, r, sts)); /* needs rank 1's progress: it waits in MPI_Recv */
        for (int k = 0; k < 4; k++) CHECK(cancelled(&sts[k]), "send %d is cancelled", k);
        CHECK(!cancelled(&sts[4]), "a matched send is not cancelled");
        CHECK(r[3] != MPI_REQUEST_NULL, "a persistent send stays");
        /* The persistent send again, not cancelled this time. */
        OK(MPI_Start(&r[3]));
        OK(MPI_Wait(&r[3], &st));
        CHECK(!cancelled(&st), "the restarted persistent send goes");
        OK(MPI_Request_free(&r[3]));
        OK(MPI_Send(NULL, 0, MPI_INT, 1, 207, MPI_COMM_WORLD)); /* "done" */
    } else if (rank == 1) {
        static unsigned char buf[LARGE];
        OK(MPI_Recv(buf, SMALL, MPI_BYTE, 0, 204, MPI_COMM_WORLD, &st));
        OK(MPI_Send(NULL, 0, MPI_INT, 0, 206, MPI_COMM_WORLD));
        OK(MPI_Recv(NULL, 0, MPI_INT, 0, 207, MPI_COMM_WORLD, &st));
        /* The buffered send could not be withdrawn (its request was complete): it arrives. The
         * restarted persistent one too. The cancelled ones are gone. */
        OK(MPI_Recv(buf, SMALL, MPI_BYTE, 0, 205, MPI_COMM_WORLD, &st));
        OK(MPI_Recv(buf, SMALL, MPI_BYTE, 0, 203, MPI_COMM_WORLD, &st));
        CHECK(buf[0] == 1 && buf[SMALL - 1] == 1, "the persistent send's data");
        for (int tag = 200; tag <= 203; tag++) {
            int flag = 1;
            OK(MPI_Iprobe(0, tag, MPI_COMM_WORLD, &flag, &st));
            CHECK(!flag, "cancelled message %d still arrived", tag);
        }
    }
}

static void matched_probes(int rank) {
    static int large[LARGE / 4];
    MPI_Status st;
    MPI_Message m;
    MPI_Datatype every_other;
    OK(MPI_Type_vector(50, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    if (rank == 0) {
        int a[100];
        for (int i = 0; i < 100; i++) a[i] = i * 3;
        for (int i = 0; i < LARGE / 4; i++) large[i] = i;
        OK(MPI_Send(a, 10, MPI_INT, 1, 300, MPI_COMM_WORLD));
        OK(MPI_Send(large, LARGE / 4, MPI_INT, 1, 301, MPI_COMM_WORLD));
        OK(MPI_Send(a, 50, MPI_INT, 1, 302, MPI_COMM_WORLD));
        OK(MPI_Send(large, LARGE / 4, MPI_INT, 1, 303, MPI_COMM_WORLD));
    } else if (rank == 1) {
        OK(MPI_Mprobe(MPI_ANY_SOURCE, 300, MPI_COMM_WORLD, &m, &st));
        int n = -1;
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(m != MPI_MESSAGE_NULL && st.MPI_SOURCE == 0 && st.MPI_TAG == 300 && n == 10, "mprobe status");
        /* Reserved: no probe or receive sees it any more; a wildcard receive gets the next one. */
        int flag = 1;
        MPI_Status pst;
        OK(MPI_Iprobe(0, 300, MPI_COMM_WORLD, &flag, &pst));
        CHECK(!flag, "a reserved message is still probed");
        memset(large, 0, sizeof large);
        OK(MPI_Recv(large, LARGE / 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pst));
        CHECK(pst.MPI_TAG == 301 && large[LARGE / 4 - 1] == LARGE / 4 - 1, "the wildcard receive got %d",
              pst.MPI_TAG);
        int got[100];
        memset(got, -1, sizeof got);
        OK(MPI_Mrecv(got, 10, MPI_INT, &m, &st));
        CHECK(m == MPI_MESSAGE_NULL && got[9] == 27 && got[10] == -1 && st.MPI_TAG == 300, "mrecv");
        /* Improbe, then Imrecv into a typed (non-contiguous) buffer. */
        flag = 0;
        while (!flag) OK(MPI_Improbe(0, 302, MPI_COMM_WORLD, &flag, &m, &st));
        memset(got, -1, sizeof got);
        MPI_Request r;
        OK(MPI_Imrecv(got, 1, every_other, &m, &r));
        OK(MPI_Wait(&r, &st));
        for (int i = 0; i < 100; i++)
            CHECK(got[i] == (i % 2 ? -1 : (i / 2) * 3), "typed imrecv: element %d is %d", i, got[i]);
        /* A large message reserved, then received. */
        OK(MPI_Mprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st));
        CHECK(st.MPI_TAG == 303, "the large message's tag %d", st.MPI_TAG);
        memset(large, 0, sizeof large);
        OK(MPI_Imrecv(large, LARGE / 4, MPI_INT, &m, &r));
        OK(MPI_Wait(&r, &st));
        for (int i = 0; i < LARGE / 4; i++) CHECK(large[i] == i, "large mrecv: %d", i);
    }
    /* MPI_PROC_NULL: MPI_MESSAGE_NO_PROC, and its receives complete at once. */
    OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
    CHECK(m == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL, "mprobe of PROC_NULL");
    int x = 5;
    OK(MPI_Mrecv(&x, 1, MPI_INT, &m, &st));
    CHECK(m == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL && x == 5, "mrecv of NO_PROC");
    int flag = 0;
    OK(MPI_Improbe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &m, &st));
    CHECK(flag && m == MPI_MESSAGE_NO_PROC, "improbe of PROC_NULL");
    MPI_Request r;
    OK(MPI_Imrecv(&x, 1, MPI_INT, &m, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "imrecv of NO_PROC");
    OK(MPI_Type_free(&every_other));
}

int main(int argc, char **argv) {
    int rank, nranks;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    check_rank = rank;
    CHECK(nranks >= 2, "needs 2 ranks");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int space = SMALL + MPI_BSEND_OVERHEAD;
    void *att = xmalloc((size_t)space);
    OK(MPI_Buffer_attach(att, space));
    receives(rank);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    sends(rank);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    matched_probes(rank);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* An inactive request cannot be cancelled; a null one neither. */
    MPI_Request r = MPI_REQUEST_NULL;
    FAILS_WITH(MPI_Cancel(&r), MPI_ERR_REQUEST);
    int size;
    OK(MPI_Buffer_detach(&att, &size));
    free(att);
    printf("OK cancel_mprobe %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
