/* A session's buffer for buffered sends (MPI-4.1 §3.6), in the Sessions model alone (MPI_Init
 * never called): a communicator from a process set of session S sends through S's buffer
 * (MPI_Session_attach_buffer), not through another session's; a buffer of the communicator's own
 * comes first; MPI_Session_flush_buffer, MPI_Session_iflush_buffer, the detach waiting for the
 * messages and giving the buffer back (int and MPI_Count sizes), MPI_BUFFER_AUTOMATIC, a buffer
 * still attached at MPI_Session_finalize, and bad input (detach with none attached and attach
 * twice: MPI_ERR_BUFFER, as MPICH; a negative size: MPI_ERR_COUNT; a null request: MPI_ERR_ARG).
 * Prints "OK session_buffer <rank>". */
#include "check.h"

#define N 64     /* ints in a small message */
#define BIG 50000 /* ints in a large one (sent by rendezvous) */
#define MSGS 8

/* A communicator over mpi://WORLD of session S. */
static MPI_Comm world_of(MPI_Session s, const char *tag) {
    MPI_Group g;
    MPI_Comm c;
    OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    OK(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    OK(MPI_Group_free(&g));
    return c;
}

int main(void) {
    MPI_Session s, t;
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &t));
    MPI_Comm c = world_of(s, "session_buffer/s"), other = world_of(t, "session_buffer/t");
    int rank, size;
    OK(MPI_Comm_rank(c, &rank));
    OK(MPI_Comm_size(c, &size));
    check_rank = rank;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *v = xmalloc(BIG * sizeof(int)), *w = xmalloc((MSGS + 1) * BIG * sizeof(int));
    for (int i = 0; i < BIG; i++) v[i] = rank * 1000 + i;

    /* Nothing attached: no buffer for a buffered send; detach and flush. */
    void *back = NULL;
    int got = -1;
    FAILS_WITH(MPI_Bsend(v, N, MPI_INT, right, 1, c), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Session_detach_buffer(s, &back, &got), MPI_ERR_BUFFER);
    OK(MPI_Session_flush_buffer(s));

    /* S's buffer: room for MSGS small messages and one large. */
    int bsize = MSGS * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD) + BIG * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
    char *sbuf = xmalloc((size_t)bsize), *cbuf = xmalloc(64);
    OK(MPI_Session_attach_buffer(s, sbuf, bsize));
    FAILS_WITH(MPI_Session_attach_buffer(s, sbuf, bsize), MPI_ERR_BUFFER);
    /* T's communicator does not see S's buffer. */
    FAILS_WITH(MPI_Bsend(v, N, MPI_INT, right, 1, other), MPI_ERR_BUFFER);

    /* MSGS small and one large message to the right, the receives posted first. */
    MPI_Request r[MSGS + 2];
    for (int i = 0; i <= MSGS; i++)
        OK(MPI_Irecv(w + (size_t)i * BIG, i < MSGS ? N : BIG, MPI_INT, left, 10 + i, c, &r[i]));
    OK(MPI_Barrier(c));
    for (int i = 0; i < MSGS; i++) OK(MPI_Bsend(v + i, N, MPI_INT, right, 10 + i, c));
    OK(MPI_Bsend(v, BIG, MPI_INT, right, 10 + MSGS, c));
    OK(MPI_Session_iflush_buffer(s, &r[MSGS + 1]));
    OK(MPI_Waitall(MSGS + 2, r, MPI_STATUSES_IGNORE));
    for (int i = 0; i < MSGS; i++) {
        int *m = w + (size_t)i * BIG;
        CHECK(m[0] == left * 1000 + i && m[N - 1] == left * 1000 + i + N - 1, "message %d: %d %d", i, m[0], m[N - 1]);
    }
    CHECK(w[MSGS * BIG + BIG - 1] == left * 1000 + BIG - 1, "large message: %d", w[MSGS * BIG + BIG - 1]);
    /* The flush freed the whole buffer: MSGS messages fit again. */
    OK(MPI_Session_flush_buffer(s));
    for (int i = 0; i < MSGS; i++) OK(MPI_Bsend(v + i, N, MPI_INT, right, 30 + i, c));

    /* A buffer of the communicator's own comes first: 64 bytes hold no N ints. */
    OK(MPI_Comm_attach_buffer(c, cbuf, 64));
    FAILS_WITH(MPI_Bsend(v, N, MPI_INT, right, 99, c), MPI_ERR_BUFFER);
    OK(MPI_Comm_detach_buffer(c, &back, &got));
    CHECK(back == cbuf && got == 64, "Comm_detach_buffer %p %d", back, got);

    /* The detach waits for the messages still in the buffer, then gives it back. */
    OK(MPI_Session_detach_buffer(s, &back, &got));
    CHECK(back == sbuf && got == bsize, "Session_detach_buffer %p %d (attached %p %d)", back, got, (void *)sbuf,
          bsize);
    for (int i = 0; i < MSGS; i++) {
        OK(MPI_Recv(w, N, MPI_INT, left, 30 + i, c, MPI_STATUS_IGNORE));
        CHECK(w[N - 1] == left * 1000 + i + N - 1, "after detach, message %d: %d", i, w[N - 1]);
    }
    FAILS_WITH(MPI_Bsend(v, N, MPI_INT, right, 99, c), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Session_detach_buffer(s, &back, &got), MPI_ERR_BUFFER);

    /* The MPI_Count forms, and MPI_BUFFER_AUTOMATIC. */
    MPI_Count cgot = -1;
    OK(MPI_Session_attach_buffer_c(s, sbuf, (MPI_Count)bsize));
    OK(MPI_Bsend(v, N, MPI_INT, right, 40, c));
    OK(MPI_Recv(w, N, MPI_INT, left, 40, c, MPI_STATUS_IGNORE));
    CHECK(w[1] == left * 1000 + 1, "_c buffer: %d", w[1]);
    OK(MPI_Session_detach_buffer_c(s, &back, &cgot));
    CHECK(back == sbuf && cgot == bsize, "Session_detach_buffer_c %p %lld", back, (long long)cgot);
    OK(MPI_Session_attach_buffer(s, MPI_BUFFER_AUTOMATIC, 0));
    for (int i = 0; i < 4; i++) OK(MPI_Bsend(v, BIG, MPI_INT, right, 50 + i, c));
    for (int i = 0; i < 4; i++) {
        OK(MPI_Recv(w, BIG, MPI_INT, left, 50 + i, c, MPI_STATUS_IGNORE));
        CHECK(w[BIG - 1] == left * 1000 + BIG - 1, "automatic buffer, message %d: %d", i, w[BIG - 1]);
    }
    OK(MPI_Session_detach_buffer(s, &back, &got));
    CHECK(back == MPI_BUFFER_AUTOMATIC, "detach gives MPI_BUFFER_AUTOMATIC back");

    /* Bad input, through the session's handler (MPI_ERRORS_RETURN). */
    FAILS_WITH(MPI_Session_attach_buffer(s, sbuf, -1), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Session_iflush_buffer(s, NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Session_detach_buffer(s, NULL, &got), MPI_ERR_ARG);

    /* A buffer still attached when its session ends: T's, with a message in it. */
    OK(MPI_Session_attach_buffer(t, sbuf, bsize));
    OK(MPI_Bsend(v, N, MPI_INT, right, 60, other));
    OK(MPI_Recv(w, N, MPI_INT, left, 60, other, MPI_STATUS_IGNORE));
    CHECK(w[2] == left * 1000 + 2, "T's buffer: %d", w[2]);
    OK(MPI_Comm_free(&other));
    OK(MPI_Session_finalize(&t));
    OK(MPI_Comm_free(&c));
    OK(MPI_Session_finalize(&s));
    free(v);
    free(w);
    free(sbuf);
    free(cbuf);
    printf("OK session_buffer %d\n", rank);
    return 0;
}
