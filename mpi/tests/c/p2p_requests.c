/* Requests of MPI-4.1: MPI_Isendrecv(_replace) (and _c) in a ring, Request_get_status_all/any/
 * some, the status accessors, generalized requests (query, free and cancel callbacks called as
 * the standard says, a query that fails), and the buffer calls (Buffer_flush/iflush, a
 * communicator's own buffer, MPI_BUFFER_AUTOMATIC); bad input returns the classes the standard
 * names. */
#include "check.h"

#include <pthread.h>
#include <time.h>

/* Generalized requests: what each callback saw. */
struct greq {
    int queries, frees, cancels, cancel_complete, query_code;
};

static int query_fn(void *extra, MPI_Status *st) {
    struct greq *g = extra;
    g->queries++;
    /* A callback may call MPI. */
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Status_set_source(st, rank);
    MPI_Status_set_tag(st, 77);
    MPI_Status_set_cancelled(st, 0);
    MPI_Status_set_elements(st, MPI_INT, 3);
    return g->query_code;
}

static int free_fn(void *extra) {
    ((struct greq *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete) {
    struct greq *g = extra;
    g->cancels++;
    g->cancel_complete = complete;
    return MPI_SUCCESS;
}

static void generalized(int rank) {
    struct greq g = {0, 0, 0, -1, MPI_SUCCESS};
    MPI_Request r;
    MPI_Status st;
    int flag = 1;
    OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &g, &r));
    OK(MPI_Test(&r, &flag, &st));
    CHECK(!flag && g.queries == 0, "a generalized request is complete only when the program says");
    OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(!flag, "get_status before complete");
    OK(MPI_Cancel(&r));
    CHECK(g.cancels == 1 && g.cancel_complete == 0, "cancel_fn %d %d", g.cancels, g.cancel_complete);
    OK(MPI_Grequest_complete(r));
    OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(flag && g.queries >= 1 && g.frees == 0, "get_status after complete: %d %d %d", flag, g.queries, g.frees);
    OK(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "freed");
    CHECK(g.frees == 1, "free_fn after the wait: %d", g.frees);
    int n = 0;
    OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(st.MPI_SOURCE == rank && st.MPI_TAG == 77 && n == 3, "query's status: %d %d %d", st.MPI_SOURCE, st.MPI_TAG, n);

    /* Completed before any wait, in a Waitall with a point-to-point request. */
    struct greq h = {0, 0, 0, -1, MPI_SUCCESS};
    MPI_Request rs[2];
    int v = rank, w = -1;
    OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &h, &rs[0]));
    OK(MPI_Irecv(&w, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &rs[1]));
    OK(MPI_Send(&v, 1, MPI_INT, 0, 5, MPI_COMM_SELF));
    OK(MPI_Grequest_complete(rs[0]));
    OK(MPI_Cancel(&rs[0]));
    CHECK(h.cancel_complete == 1, "cancel_fn told it is complete");
    MPI_Status sts[2];
    OK(MPI_Waitall(2, rs, sts));
    CHECK(h.frees == 1 && h.queries >= 1 && w == rank, "Waitall of a generalized request");
    CHECK(sts[0].MPI_TAG == 77, "Waitall status %d", sts[0].MPI_TAG);

    /* Request_free before completion: free_fn once it completes. */
    struct greq k = {0, 0, 0, -1, MPI_SUCCESS};
    OK(MPI_Grequest_start(query_fn, free_fn, NULL, &k, &r));
    MPI_Request keep = r;
    OK(MPI_Request_free(&r));
    OK(MPI_Grequest_complete(keep));
    OK(MPI_Test(&rs[0], &flag, MPI_STATUS_IGNORE)); /* rs[0] is null: a completion call reaps */
    CHECK(k.frees <= 1, "free_fn at most once");

    /* A failing query_fn: its code is the wait's error. */
    struct greq bad = {0, 0, 0, -1, MPI_ERR_OTHER};
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &bad, &r));
    OK(MPI_Grequest_complete(r));
    FAILS_WITH(MPI_Wait(&r, &st), MPI_ERR_OTHER);
    CHECK(bad.frees == 1, "free_fn after a failed query");
    FAILS_WITH(MPI_Grequest_complete(MPI_REQUEST_NULL), MPI_ERR_REQUEST);
    FAILS_WITH(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &bad, NULL), MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* Completed by another thread while this one waits (MPI_THREAD_MULTIPLE); the query calls MPI. */
static int plain_query(void *extra, MPI_Status *st) {
    ((struct greq *)extra)->queries++;
    /* Under MPI_THREAD_MULTIPLE too, a callback may call MPI (it runs without the library's lock). */
    int size = 0;
    if (MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS || size < 1) return MPI_ERR_OTHER;
    st->MPI_SOURCE = 3;
    st->MPI_TAG = 4;
    st->MPI_ERROR = MPI_SUCCESS;
    return MPI_SUCCESS;
}

static void *completer(void *arg) {
    MPI_Request r = *(MPI_Request *)arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    OK(MPI_Grequest_complete(r));
    return NULL;
}

static void threaded(void) {
    for (int round = 0; round < 3; round++) {
        struct greq g = {0, 0, 0, -1, MPI_SUCCESS};
        MPI_Request r, keep;
        OK(MPI_Grequest_start(plain_query, free_fn, cancel_fn, &g, &r));
        keep = r;
        pthread_t t;
        CHECK(pthread_create(&t, NULL, completer, &keep) == 0, "pthread_create");
        MPI_Status st;
        if (round == 0) {
            OK(MPI_Wait(&r, &st));
        } else if (round == 1) {
            int index;
            OK(MPI_Waitany(1, &r, &index, &st));
            CHECK(index == 0, "Waitany index %d", index);
        } else {
            int flag = 0;
            while (!flag) OK(MPI_Test(&r, &flag, &st));
        }
        pthread_join(t, NULL);
        CHECK(r == MPI_REQUEST_NULL && g.queries == 1 && g.frees == 1, "round %d: %d %d", round, g.queries, g.frees);
        CHECK(st.MPI_SOURCE == 3 && st.MPI_TAG == 4, "status %d %d", st.MPI_SOURCE, st.MPI_TAG);
    }
}

static void sendrecv(int rank, int size) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[100], in[100];
    for (int i = 0; i < 100; i++) out[i] = rank * 1000 + i;
    MPI_Request r;
    MPI_Status st;
    OK(MPI_Isendrecv(out, 100, MPI_INT, right, 1, in, 100, MPI_INT, left, 1, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 1, "Isendrecv status %d %d", st.MPI_SOURCE, st.MPI_TAG);
    for (int i = 0; i < 100; i++) CHECK(in[i] == left * 1000 + i, "Isendrecv [%d] = %d", i, in[i]);

    memcpy(in, out, sizeof in);
    OK(MPI_Isendrecv_replace(in, 100, MPI_INT, right, 2, left, 2, MPI_COMM_WORLD, &r));
    int flag = 0;
    while (!flag) OK(MPI_Test(&r, &flag, &st));
    for (int i = 0; i < 100; i++) CHECK(in[i] == left * 1000 + i, "Isendrecv_replace [%d] = %d", i, in[i]);

    /* Large-count forms, a strided type, a message past the eager size. */
    enum { N = 200000 };
    double *a = xmalloc(2 * N * sizeof(double)), *b = xmalloc(2 * N * sizeof(double));
    for (int i = 0; i < 2 * N; i++) a[i] = rank + i * 0.5, b[i] = -1;
    MPI_Datatype every2;
    OK(MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &every2));
    OK(MPI_Type_commit(&every2));
    OK(MPI_Isendrecv_c(a, 1, every2, right, 3, b, N, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, &st));
    for (int i = 0; i < N; i++) CHECK(b[i] == left + 2 * i * 0.5, "Isendrecv_c [%d] = %g", i, b[i]);
    MPI_Count c;
    OK(MPI_Get_count_c(&st, MPI_DOUBLE, &c));
    CHECK(c == N, "count %ld", (long)c);
    for (int i = 0; i < 2 * N; i++) a[i] = rank + i;
    OK(MPI_Isendrecv_replace_c(a, 1, every2, right, 4, left, 4, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < 2 * N; i++) {
        double want = i % 2 == 0 ? left + i : rank + i;
        CHECK(a[i] == want, "Isendrecv_replace_c [%d] = %g, expected %g", i, a[i], want);
    }
    OK(MPI_Type_free(&every2));
    free(a);
    free(b);

    /* PROC_NULL on both sides. */
    OK(MPI_Isendrecv(out, 1, MPI_INT, MPI_PROC_NULL, 0, in, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL Isendrecv %d", st.MPI_SOURCE);

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Isendrecv(out, -1, MPI_INT, right, 0, in, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Isendrecv(out, 1, MPI_INT, size, 0, in, 1, MPI_INT, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_RANK);
    FAILS_WITH(MPI_Isendrecv_replace(in, 1, MPI_INT, right, -2, left, 0, MPI_COMM_WORLD, &r), MPI_ERR_TAG);
    FAILS_WITH(MPI_Isendrecv(out, 1, MPI_INT, right, 0, in, 1, MPI_INT, left, 0, MPI_COMM_NULL, &r), MPI_ERR_COMM);
    FAILS_WITH(MPI_Isendrecv(out, 1, MPI_INT, right, 0, in, 1, MPI_INT, left, 0, MPI_COMM_WORLD, NULL), MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void get_status(int rank, int size) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int v[3] = {rank, rank + 1, rank + 2}, w[3] = {-1, -1, -1};
    MPI_Request rs[4];
    MPI_Status sts[4];
    int flag = -1, index = -1, outcount = -1, indices[4];
    /* Nothing active: flag true, index and outcount MPI_UNDEFINED. */
    rs[0] = rs[1] = MPI_REQUEST_NULL;
    OK(MPI_Request_get_status_any(2, rs, &index, &flag, &sts[0]));
    CHECK(flag && index == MPI_UNDEFINED, "get_status_any on nulls: %d %d", flag, index);
    OK(MPI_Request_get_status_some(2, rs, &outcount, indices, sts));
    CHECK(outcount == MPI_UNDEFINED, "get_status_some on nulls: %d", outcount);
    OK(MPI_Request_get_status_all(2, rs, &flag, sts));
    CHECK(flag, "get_status_all on nulls");

    OK(MPI_Irecv(&w[0], 1, MPI_INT, left, 10, MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Irecv(&w[1], 1, MPI_INT, left, 11, MPI_COMM_WORLD, &rs[1]));
    OK(MPI_Irecv(&w[2], 1, MPI_INT, left, 12, MPI_COMM_WORLD, &rs[2]));
    OK(MPI_Request_get_status_all(3, rs, &flag, sts));
    CHECK(!flag, "nothing sent yet");
    OK(MPI_Request_get_status_any(3, rs, &index, &flag, &sts[0]));
    CHECK(!flag && index == MPI_UNDEFINED, "get_status_any: %d %d", flag, index);
    OK(MPI_Barrier(MPI_COMM_WORLD)); /* every rank looked before anything is sent */
    OK(MPI_Send(&v[1], 1, MPI_INT, right, 11, MPI_COMM_WORLD));
    do OK(MPI_Request_get_status_any(3, rs, &index, &flag, &sts[0]));
    while (!flag);
    CHECK(index == 1 && sts[0].MPI_TAG == 11 && sts[0].MPI_SOURCE == left, "get_status_any: %d %d", index, sts[0].MPI_TAG);
    CHECK(rs[1] != MPI_REQUEST_NULL, "get_status_any frees nothing");
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Send(&v[2], 1, MPI_INT, right, 12, MPI_COMM_WORLD));
    do OK(MPI_Request_get_status_some(3, rs, &outcount, indices, sts));
    while (outcount < 2);
    CHECK(outcount == 2 && indices[0] == 1 && indices[1] == 2, "get_status_some: %d [%d %d]", outcount, indices[0], indices[1]);
    CHECK(sts[1].MPI_TAG == 12 && sts[1].MPI_ERROR == MPI_SUCCESS, "get_status_some status");
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Send(&v[0], 1, MPI_INT, right, 10, MPI_COMM_WORLD));
    do OK(MPI_Request_get_status_all(3, rs, &flag, sts));
    while (!flag);
    for (int i = 0; i < 3; i++) CHECK(sts[i].MPI_TAG == 10 + i, "get_status_all [%d] tag %d", i, sts[i].MPI_TAG);
    OK(MPI_Waitall(3, rs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 3; i++) CHECK(w[i] == left + i, "received [%d] = %d", i, w[i]);

    /* The accessors. */
    MPI_Status s;
    int x = 0;
    OK(MPI_Status_set_source(&s, 5));
    OK(MPI_Status_set_tag(&s, 6));
    OK(MPI_Status_set_error(&s, MPI_ERR_TAG));
    OK(MPI_Status_get_source(&s, &x));
    CHECK(x == 5 && s.MPI_SOURCE == 5, "source %d", x);
    OK(MPI_Status_get_tag(&s, &x));
    CHECK(x == 6 && s.MPI_TAG == 6, "tag %d", x);
    OK(MPI_Status_get_error(&s, &x));
    CHECK(x == MPI_ERR_TAG && s.MPI_ERROR == MPI_ERR_TAG, "error %d", x);

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Request_get_status_all(-1, rs, &flag, sts), MPI_ERR_COUNT);
    rs[0] = 12345;
    FAILS_WITH(MPI_Request_get_status_any(1, rs, &index, &flag, &s), MPI_ERR_REQUEST);
    FAILS_WITH(MPI_Request_get_status_some(1, rs, &outcount, indices, sts), MPI_ERR_REQUEST);
    FAILS_WITH(MPI_Status_get_tag(&s, NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Status_set_tag(MPI_STATUS_IGNORE, 1), MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void buffers(int rank, int size) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int v[50], w[50];
    for (int i = 0; i < 50; i++) v[i] = rank + i;
    int bsize = 8 * (int)sizeof v + 8 * MPI_BSEND_OVERHEAD;
    char *pbuf = xmalloc(bsize), *cbuf = xmalloc(bsize);
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Buffer_attach(pbuf, bsize));
    OK(MPI_Comm_attach_buffer(dup, cbuf, bsize));
    /* 8 messages on each: each buffer holds 8, so neither spills into the other. */
    for (int i = 0; i < 8; i++) {
        OK(MPI_Bsend(v, 50, MPI_INT, right, i, MPI_COMM_WORLD));
        OK(MPI_Bsend(v, 50, MPI_INT, right, i, dup));
    }
    /* A message larger than the communicator's buffer does not fit (nor go to the process's). */
    int *large = xmalloc((size_t)bsize * 2);
    OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Bsend(large, bsize / 2, MPI_INT, right, 99, dup), MPI_ERR_BUFFER);
    OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_ARE_FATAL));
    free(large);
    for (int i = 0; i < 8; i++) {
        OK(MPI_Recv(w, 50, MPI_INT, left, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(w[49] == left + 49, "Bsend on WORLD");
        OK(MPI_Recv(w, 50, MPI_INT, left, i, dup, MPI_STATUS_IGNORE));
        CHECK(w[7] == left + 7, "Bsend on the communicator's buffer");
    }
    OK(MPI_Buffer_flush());
    OK(MPI_Comm_flush_buffer(dup));
    MPI_Request r[2];
    OK(MPI_Bsend(v, 50, MPI_INT, right, 20, MPI_COMM_WORLD));
    OK(MPI_Bsend(v, 50, MPI_INT, right, 21, dup));
    OK(MPI_Buffer_iflush(&r[0]));
    OK(MPI_Comm_iflush_buffer(dup, &r[1]));
    OK(MPI_Recv(w, 50, MPI_INT, left, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Recv(w, 50, MPI_INT, left, 21, dup, MPI_STATUS_IGNORE));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    void *back;
    int got;
    OK(MPI_Comm_detach_buffer(dup, &back, &got));
    CHECK(back == cbuf && got == bsize, "Comm_detach_buffer %p %d", back, got);
    OK(MPI_Buffer_detach(&back, &got));
    CHECK(back == pbuf && got == bsize, "Buffer_detach %p %d", back, got);

    /* MPI_BUFFER_AUTOMATIC: as much as the messages need. */
    OK(MPI_Comm_attach_buffer(dup, MPI_BUFFER_AUTOMATIC, 0));
    int *big = xmalloc(100000 * sizeof(int)), *big2 = xmalloc(100000 * sizeof(int));
    for (int i = 0; i < 100000; i++) big[i] = rank * 7 + i;
    for (int i = 0; i < 4; i++) OK(MPI_Bsend(big, 100000, MPI_INT, right, 30 + i, dup));
    for (int i = 0; i < 4; i++) {
        OK(MPI_Recv(big2, 100000, MPI_INT, left, 30 + i, dup, MPI_STATUS_IGNORE));
        CHECK(big2[99999] == left * 7 + 99999, "automatic buffer");
    }
    OK(MPI_Comm_detach_buffer(dup, &back, &got));
    CHECK(back == MPI_BUFFER_AUTOMATIC, "detach gives MPI_BUFFER_AUTOMATIC back");
    OK(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0));
    OK(MPI_Bsend(big, 100000, MPI_INT, right, 40, MPI_COMM_WORLD));
    OK(MPI_Recv(big2, 100000, MPI_INT, left, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Buffer_detach(&back, &got));

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN)); /* its errors go to its handler */
    FAILS_WITH(MPI_Comm_detach_buffer(dup, &back, &got), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Comm_attach_buffer(MPI_COMM_NULL, cbuf, bsize), MPI_ERR_COMM);
    FAILS_WITH(MPI_Comm_flush_buffer(MPI_COMM_NULL), MPI_ERR_COMM);
    FAILS_WITH(MPI_Buffer_attach(pbuf, -1), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Buffer_iflush(NULL), MPI_ERR_ARG);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Comm_free(&dup));
    free(big);
    free(big2);
    free(pbuf);
    free(cbuf);
}

int main(int argc, char **argv) {
    int rank, size, provided;
    /* P2P_THREADS: MPI_THREAD_MULTIPLE, generalized requests completed by another thread. */
    int threads = getenv("P2P_THREADS") != NULL;
    OK(MPI_Init_thread(&argc, &argv, threads ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    if (threads) {
        CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
        threaded();
        OK(MPI_Barrier(MPI_COMM_WORLD));
        printf("OK p2p_requests %d\n", rank);
        OK(MPI_Finalize());
        return 0;
    }
    sendrecv(rank, size);
    get_status(rank, size);
    generalized(rank);
    buffers(rank, size);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK p2p_requests %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
