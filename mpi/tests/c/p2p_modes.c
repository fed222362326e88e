/* Point to point beyond send and receive: the send modes (Ssend, Bsend, Rsend and their
 * non-blocking forms), the attached buffer, Sendrecv_replace, persistent requests, Request_free,
 * Request_get_status, Waitsome/Testany/Testsome, and MPI_PROC_NULL in every call. Every datum is
 * checked. Rank 0 talks to every other rank; any number of ranks >= 2. Prints "OK p2p_modes <rank>". */
#include "check.h"

enum { SMALL = 100, LARGE = 300000 }; /* LARGE is past every eager limit: rendezvous */

static void fill(unsigned char *b, int n, int seed) {
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

static void expect(const unsigned char *b, int n, int seed, const char *what) {
    for (int i = 0; i < n; i++)
        CHECK(b[i] == (unsigned char)(seed * 131 + i * 7 + (i >> 8)), "%s: byte %d of %d", what, i, n);
}

static void expect_proc_null(const MPI_Status *st, const char *what) {
    int count = -1;
    OK(MPI_Get_count(st, MPI_BYTE, &count));
    CHECK(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && count == 0, "%s: source %d tag %d count %d",
          what, st->MPI_SOURCE, st->MPI_TAG, count);
}

static void expect_empty(const MPI_Status *st, const char *what) {
    int count = -1, cancelled = -1;
    OK(MPI_Get_count(st, MPI_BYTE, &count));
    OK(MPI_Test_cancelled(st, &cancelled));
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && count == 0 && !cancelled,
          "%s: not the empty status (source %d tag %d count %d)", what, st->MPI_SOURCE, st->MPI_TAG, count);
}

/* Ssend, Rsend, Issend, Irsend, Isend from rank 0 to `peer`, small and large. */
static void modes(int rank, int peer) {
    unsigned char *buf = xmalloc(LARGE);
    MPI_Status st;
    for (int large = 0; large <= 1; large++) {
        int n = large ? LARGE : SMALL;
        if (rank == 0) {
            fill(buf, n, 1);
            OK(MPI_Ssend(buf, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD));
            /* Ready mode: the receive is posted before the peer's go-ahead arrives. */
            OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &st));
            fill(buf, n, 2);
            OK(MPI_Rsend(buf, n, MPI_BYTE, peer, 3, MPI_COMM_WORLD));
            MPI_Request r[3];
            unsigned char *b2 = xmalloc(LARGE), *b3 = xmalloc(LARGE);
            fill(b2, n, 3);
            fill(b3, n, 4);
            OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &st));
            OK(MPI_Issend(buf, n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &r[0]));
            OK(MPI_Irsend(b2, n, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &r[1]));
            OK(MPI_Isend(b3, n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, &r[2]));
            OK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
            free(b2);
            free(b3);
        } else {
            OK(MPI_Recv(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st));
            expect(buf, n, 1, "Ssend");
            MPI_Request r;
            OK(MPI_Irecv(buf, n, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &r));
            OK(MPI_Send(NULL, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD));
            OK(MPI_Wait(&r, &st));
            expect(buf, n, 2, "Rsend");
            MPI_Request rs[3];
            unsigned char *b2 = xmalloc(LARGE), *b3 = xmalloc(LARGE);
            OK(MPI_Irecv(buf, n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &rs[0]));
            OK(MPI_Irecv(b2, n, MPI_BYTE, 0, 6, MPI_COMM_WORLD, &rs[1]));
            OK(MPI_Irecv(b3, n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &rs[2]));
            OK(MPI_Send(NULL, 0, MPI_BYTE, 0, 4, MPI_COMM_WORLD));
            MPI_Status sts[3];
            OK(MPI_Waitall(3, rs, sts));
            expect(buf, n, 2, "Issend");
            expect(b2, n, 3, "Irsend");
            expect(b3, n, 4, "Isend");
            for (int k = 0; k < 3; k++) CHECK(sts[k].MPI_TAG == 5 + k && sts[k].MPI_SOURCE == 0, "status %d", k);
            free(b2);
            free(b3);
        }
    }
    free(buf);
}

/* Buffered sends: they return before the receiver posts anything, large ones too. */
static void buffered(int rank, int peer) {
    enum { K = 5 };
    int sizes[K] = {0, 1, SMALL, 5000, LARGE};
    MPI_Status st;
    if (rank == 0) {
        int space = 0;
        for (int k = 0; k < K; k++) space += sizes[k] + MPI_BSEND_OVERHEAD;
        char *attached = xmalloc((size_t)space);
        OK(MPI_Buffer_attach(attached, space));
        FAILS_WITH(MPI_Buffer_attach(attached, space), MPI_ERR_BUFFER);
        unsigned char *data = xmalloc(LARGE);
        for (int k = 0; k < K; k++) {
            fill(data, sizes[k], 10 + k);
            if (k % 2)
                OK(MPI_Bsend(data, sizes[k], MPI_BYTE, peer, 20 + k, MPI_COMM_WORLD));
            else {
                MPI_Request r;
                OK(MPI_Ibsend(data, sizes[k], MPI_BYTE, peer, 20 + k, MPI_COMM_WORLD, &r));
                int done = 0;
                OK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
                CHECK(done && r == MPI_REQUEST_NULL, "an Ibsend completes once copied");
            }
            memset(data, 0, (size_t)sizes[k]); /* the copy is what goes */
        }
        /* The large message is held (its receive is not posted yet): another does not fit. */
        FAILS_WITH(MPI_Bsend(data, LARGE, MPI_BYTE, peer, 30, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        OK(MPI_Send(NULL, 0, MPI_BYTE, peer, 31, MPI_COMM_WORLD)); /* "receive now" */
        void *back = NULL;
        int back_size = 0;
        OK(MPI_Buffer_detach(&back, &back_size)); /* waits for the sends */
        CHECK(back == attached && back_size == space, "detach gives the buffer back");
        FAILS_WITH(MPI_Buffer_detach(&back, &back_size), MPI_ERR_BUFFER);
        FAILS_WITH(MPI_Bsend(data, 1, MPI_BYTE, peer, 30, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        /* Persistent buffered sends reuse the space. */
        OK(MPI_Buffer_attach(attached, space));
        MPI_Request p;
        OK(MPI_Bsend_init(data, SMALL, MPI_BYTE, peer, 32, MPI_COMM_WORLD, &p));
        for (int i = 0; i < 50; i++) {
            fill(data, SMALL, 100 + i);
            OK(MPI_Start(&p));
            OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
            CHECK(p != MPI_REQUEST_NULL, "a persistent request stays");
        }
        OK(MPI_Request_free(&p));
        CHECK(p == MPI_REQUEST_NULL, "freed");
        OK(MPI_Buffer_detach(&back, &back_size));
        free(attached);
        free(data);
    } else {
        unsigned char *buf = xmalloc(LARGE);
        OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, 31, MPI_COMM_WORLD, &st));
        for (int k = 0; k < K; k++) {
            OK(MPI_Recv(buf, LARGE, MPI_BYTE, 0, 20 + k, MPI_COMM_WORLD, &st));
            int count = -1;
            OK(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK(count == sizes[k], "bsend %d: count %d", k, count);
            expect(buf, sizes[k], 10 + k, "Bsend");
        }
        for (int i = 0; i < 50; i++) {
            OK(MPI_Recv(buf, SMALL, MPI_BYTE, 0, 32, MPI_COMM_WORLD, &st));
            expect(buf, SMALL, 100 + i, "Bsend_init");
        }
        free(buf);
    }
}

/* Persistent requests of every kind, restarted many times. */
static void persistent(int rank, int peer) {
    enum { ITERS = 40 };
    unsigned char *a = xmalloc(LARGE), *b = xmalloc(LARGE);
    MPI_Request r[4];
    MPI_Status sts[4];
    if (rank == 0) {
        OK(MPI_Send_init(a, SMALL, MPI_BYTE, peer, 40, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Ssend_init(b, LARGE, MPI_BYTE, peer, 41, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Recv_init(NULL, 0, MPI_BYTE, peer, 42, MPI_COMM_WORLD, &r[2]));
        OK(MPI_Rsend_init(a + SMALL, SMALL, MPI_BYTE, peer, 43, MPI_COMM_WORLD, &r[3]));
        /* Inactive: waiting returns the empty status at once. */
        OK(MPI_Wait(&r[0], &sts[0]));
        expect_empty(&sts[0], "inactive wait");
        int flag = 0;
        OK(MPI_Request_get_status(r[1], &flag, &sts[1]));
        CHECK(flag == 1, "an inactive request is complete");
        for (int i = 0; i < ITERS; i++) {
            fill(a, SMALL, i);
            fill(b, LARGE, i + 1);
            fill(a + SMALL, SMALL, i + 2);
            OK(MPI_Startall(3, r));
            FAILS_WITH(MPI_Start(&r[0]), MPI_ERR_REQUEST); /* active */
            OK(MPI_Wait(&r[2], &sts[2])); /* the peer's receives are posted: ready mode */
            OK(MPI_Start(&r[3]));
            OK(MPI_Waitall(4, r, sts));
            for (int k = 0; k < 4; k++) CHECK(r[k] != MPI_REQUEST_NULL, "persistent request %d stays", k);
        }
        for (int k = 0; k < 4; k++) OK(MPI_Request_free(&r[k]));
    } else {
        OK(MPI_Recv_init(a, SMALL, MPI_BYTE, 0, 40, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Recv_init(b, LARGE, MPI_BYTE, 0, 41, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Send_init(NULL, 0, MPI_BYTE, 0, 42, MPI_COMM_WORLD, &r[2]));
        OK(MPI_Recv_init(a + SMALL, SMALL, MPI_BYTE, 0, 43, MPI_COMM_WORLD, &r[3]));
        for (int i = 0; i < ITERS; i++) {
            memset(a, 0, 2 * SMALL);
            memset(b, 0, LARGE);
            OK(MPI_Start(&r[0]));
            OK(MPI_Start(&r[1]));
            OK(MPI_Start(&r[3]));
            OK(MPI_Start(&r[2]));
            OK(MPI_Waitall(4, r, sts));
            expect(a, SMALL, i, "Send_init");
            expect(b, LARGE, i + 1, "Ssend_init");
            expect(a + SMALL, SMALL, i + 2, "Rsend_init");
            CHECK(sts[1].MPI_SOURCE == 0 && sts[1].MPI_TAG == 41, "persistent status");
        }
        for (int k = 0; k < 4; k++) OK(MPI_Request_free(&r[k]));
    }
    free(a);
    free(b);
}

/* Sendrecv_replace around the ring, small and large. */
static void replace(int rank, int nranks) {
    unsigned char *buf = xmalloc(LARGE);
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    for (int large = 0; large <= 1; large++) {
        int n = large ? LARGE : SMALL;
        fill(buf, n, rank);
        MPI_Status st;
        OK(MPI_Sendrecv_replace(buf, n, MPI_BYTE, next, 50, prev, 50, MPI_COMM_WORLD, &st));
        expect(buf, n, prev, "Sendrecv_replace");
        CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 50, "replace status");
    }
    free(buf);
}

/* Request_free on active requests; Request_get_status; Waitsome, Testsome, Testany. */
static void completion(int rank, int nranks) {
    MPI_Status st;
    if (rank == 0) {
        /* A freed send still goes; a freed receive still lands. */
        unsigned char small[SMALL], got[SMALL];
        fill(small, SMALL, 60);
        MPI_Request r;
        for (int p = 1; p < nranks; p++) {
            OK(MPI_Isend(small, SMALL, MPI_BYTE, p, 60, MPI_COMM_WORLD, &r));
            OK(MPI_Request_free(&r));
            CHECK(r == MPI_REQUEST_NULL, "freed");
        }
        memset(got, 0, SMALL);
        OK(MPI_Irecv(got, SMALL, MPI_BYTE, 1, 61, MPI_COMM_WORLD, &r));
        OK(MPI_Request_free(&r));
        /* The same source's next message comes after: once it is in, so is the first. */
        OK(MPI_Recv(NULL, 0, MPI_BYTE, 1, 62, MPI_COMM_WORLD, &st));
        expect(got, SMALL, 61, "freed receive");
        /* Get_status leaves the request to its Wait. */
        OK(MPI_Isend(small, SMALL, MPI_BYTE, 1, 63, MPI_COMM_WORLD, &r));
        int flag = 0;
        while (!flag) OK(MPI_Request_get_status(r, &flag, &st));
        CHECK(r != MPI_REQUEST_NULL, "get_status does not free");
        OK(MPI_Request_get_status(r, &flag, &st));
        CHECK(flag, "still complete");
        OK(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL, "wait frees");
        /* Waitsome / Testsome / Testany over receives from every other rank. */
        int n = nranks - 1;
        MPI_Request *rs = xmalloc(sizeof(MPI_Request) * (size_t)(2 * n + 1));
        int *vals = xmalloc(sizeof(int) * (size_t)(2 * n + 1));
        int *idx = xmalloc(sizeof(int) * (size_t)(2 * n + 1));
        MPI_Status *sts = xmalloc(sizeof(MPI_Status) * (size_t)(2 * n + 1));
        for (int round = 0; round < 3; round++) {
            for (int p = 1; p < nranks; p++) {
                OK(MPI_Irecv(&vals[2 * (p - 1)], 1, MPI_INT, p, 70 + round, MPI_COMM_WORLD, &rs[2 * (p - 1)]));
                rs[2 * (p - 1) + 1] = MPI_REQUEST_NULL; /* nulls among them are skipped */
            }
            rs[2 * n] = MPI_REQUEST_NULL;
            OK(MPI_Send(NULL, 0, MPI_BYTE, 1, 69, MPI_COMM_WORLD)); /* "go" to the chain of senders */
            int seen = 0, outcount = 0;
            char *got_from = calloc((size_t)nranks, 1);
            while (seen < n) {
                if (round == 0) {
                    OK(MPI_Waitsome(2 * n + 1, rs, &outcount, idx, sts));
                    CHECK(outcount >= 1, "waitsome returns something");
                } else if (round == 1) {
                    OK(MPI_Testsome(2 * n + 1, rs, &outcount, idx, sts));
                } else {
                    int k = -1, f = 0;
                    OK(MPI_Testany(2 * n + 1, rs, &k, &f, &sts[0]));
                    outcount = 0;
                    if (f) {
                        CHECK(k != MPI_UNDEFINED, "testany with active requests");
                        idx[0] = k;
                        outcount = 1;
                    }
                }
                for (int j = 0; j < outcount; j++) {
                    int k = idx[j], p = k / 2 + 1;
                    CHECK(k % 2 == 0 && rs[k] == MPI_REQUEST_NULL, "index %d", k);
                    CHECK(sts[j].MPI_SOURCE == p && vals[k] == p * 1000 + round && !got_from[p], "from %d: %d", p,
                          vals[k]);
                    got_from[p] = 1;
                    seen++;
                }
            }
            free(got_from);
            OK(MPI_Waitsome(2 * n + 1, rs, &outcount, idx, sts));
            CHECK(outcount == MPI_UNDEFINED, "waitsome with no active request");
            OK(MPI_Testsome(2 * n + 1, rs, &outcount, idx, sts));
            CHECK(outcount == MPI_UNDEFINED, "testsome with no active request");
            int k = 0, f = 0;
            OK(MPI_Testany(2 * n + 1, rs, &k, &f, &st));
            CHECK(f == 1 && k == MPI_UNDEFINED, "testany with no active request");
            OK(MPI_Waitany(2 * n + 1, rs, &k, &st));
            CHECK(k == MPI_UNDEFINED, "waitany with no active request");
            expect_empty(&st, "waitany with no active request");
        }
        free(rs);
        free(vals);
        free(idx);
        free(sts);
    } else {
        unsigned char buf[SMALL];
        OK(MPI_Recv(buf, SMALL, MPI_BYTE, 0, 60, MPI_COMM_WORLD, &st));
        expect(buf, SMALL, 60, "freed send");
        if (rank == 1) {
            fill(buf, SMALL, 61);
            OK(MPI_Send(buf, SMALL, MPI_BYTE, 0, 61, MPI_COMM_WORLD));
            OK(MPI_Send(NULL, 0, MPI_BYTE, 0, 62, MPI_COMM_WORLD));
            OK(MPI_Recv(buf, SMALL, MPI_BYTE, 0, 63, MPI_COMM_WORLD, &st));
        }
        for (int round = 0; round < 3; round++) {
            /* The senders go one after another (a chain), so completions come at different times. */
            OK(MPI_Recv(NULL, 0, MPI_BYTE, rank == 1 ? 0 : rank - 1, 69, MPI_COMM_WORLD, &st));
            int v = rank * 1000 + round;
            OK(MPI_Send(&v, 1, MPI_INT, 0, 70 + round, MPI_COMM_WORLD));
            if (rank + 1 < nranks) OK(MPI_Send(NULL, 0, MPI_BYTE, rank + 1, 69, MPI_COMM_WORLD));
        }
    }
}

/* MPI_PROC_NULL in every call: completes at once, status source MPI_PROC_NULL, tag MPI_ANY_TAG. */
static void proc_null(void) {
    int x = 1;
    MPI_Status st;
    MPI_Request r;
    OK(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Ssend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Rsend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Bsend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD)); /* no buffer needed */
    OK(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    expect_proc_null(&st, "Recv");
    int (*isends[])(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *) = {MPI_Isend, MPI_Issend,
                                                                                              MPI_Ibsend, MPI_Irsend};
    for (int k = 0; k < 4; k++) {
        OK(isends[k](&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, &st));
    }
    OK(MPI_Irecv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    int flag = 0;
    OK(MPI_Test(&r, &flag, &st));
    CHECK(flag && r == MPI_REQUEST_NULL, "Irecv from PROC_NULL completes at once");
    expect_proc_null(&st, "Irecv");
    MPI_Request p[2];
    OK(MPI_Send_init(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &p[0]));
    OK(MPI_Recv_init(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &p[1]));
    for (int i = 0; i < 3; i++) {
        OK(MPI_Startall(2, p));
        MPI_Status sts[2];
        OK(MPI_Waitall(2, p, sts));
        expect_proc_null(&sts[1], "Recv_init");
    }
    OK(MPI_Request_free(&p[0]));
    OK(MPI_Request_free(&p[1]));
    OK(MPI_Sendrecv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, &x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    expect_proc_null(&st, "Sendrecv");
    OK(MPI_Sendrecv_replace(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    expect_proc_null(&st, "Sendrecv_replace");
    OK(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    expect_proc_null(&st, "Probe");
    OK(MPI_Iprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag == 1, "Iprobe of PROC_NULL");
    expect_proc_null(&st, "Iprobe");
    int cancelled = -1;
    OK(MPI_Test_cancelled(&st, &cancelled));
    CHECK(cancelled == 0, "not cancelled");
}

int main(int argc, char **argv) {
    int rank, nranks;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    check_rank = rank;
    CHECK(nranks >= 2, "needs 2 ranks");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    for (int peer = 1; peer < nranks; peer++) {
        if (rank == 0 || rank == peer) {
            modes(rank, peer);
            buffered(rank, peer);
            persistent(rank, peer);
        }
    }
    replace(rank, nranks);
    completion(rank, nranks);
    proc_null();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK p2p_modes %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
