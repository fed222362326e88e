/* Errors under MPI_ERRORS_RETURN (2 ranks): invalid communicator, rank, tag, count, datatype,
 * buffer, root, operation, request, error handler and color give their classes; truncation gives
 * MPI_ERR_TRUNCATE with the status filled (eager and rendezvous messages); MPI_ERR_IN_STATUS for
 * Waitall; error strings and classes; and everything still works afterwards. Prints
 * "OK errors <rank>". */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size == 2, "needs 2 ranks");
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "the default handler is MPI_ERRORS_ARE_FATAL");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "handler set");
    int peer = 1 - rank, buf[100] = {0};
    MPI_Status st;

    /* Arguments. */
    FAILS_WITH(MPI_Send(buf, 1, MPI_INT, 2, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    FAILS_WITH(MPI_Send(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    FAILS_WITH(MPI_Recv(buf, 1, MPI_INT, 5, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK);
    FAILS_WITH(MPI_Send(buf, 1, MPI_INT, peer, -1, MPI_COMM_WORLD), MPI_ERR_TAG);
    FAILS_WITH(MPI_Recv(buf, 1, MPI_INT, peer, -5, MPI_COMM_WORLD, &st), MPI_ERR_TAG);
    FAILS_WITH(MPI_Send(buf, -1, MPI_INT, peer, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Send(buf, 1, MPI_DATATYPE_NULL, peer, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    FAILS_WITH(MPI_Send(buf, 1, (MPI_Datatype)12345, peer, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    FAILS_WITH(MPI_Send(buf, 1, MPI_INT, peer, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    FAILS_WITH(MPI_Send(buf, 1, MPI_INT, peer, 0, (MPI_Comm)0x44000999), MPI_ERR_COMM);
    FAILS_WITH(MPI_Send(NULL, 4, MPI_INT, peer, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Bcast(buf, 1, MPI_INT, 2, MPI_COMM_WORLD), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Reduce(buf, buf + 50, 1, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD), MPI_ERR_OP);
    double d = 1, e = 0;
    FAILS_WITH(MPI_Allreduce(&d, &e, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP);
    FAILS_WITH(MPI_Allreduce(buf, buf + 50, 1, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
    FAILS_WITH(MPI_Allreduce(buf, buf, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    if (rank == 1) FAILS_WITH(MPI_Reduce(MPI_IN_PLACE, buf, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    MPI_Request bad = (MPI_Request)0x6c00fff0;
    FAILS_WITH(MPI_Wait(&bad, &st), MPI_ERR_REQUEST);
    FAILS_WITH(MPI_Comm_set_errhandler(MPI_COMM_WORLD, (MPI_Errhandler)99), MPI_ERR_ARG);
    MPI_Comm c = MPI_COMM_NULL, world = MPI_COMM_WORLD;
    FAILS_WITH(MPI_Comm_split(MPI_COMM_WORLD, -3, 0, &c), MPI_ERR_ARG);
    FAILS_WITH(MPI_Comm_free(&world), MPI_ERR_COMM);
    /* A new communicator inherits MPI_ERRORS_RETURN; a freed one is invalid. */
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    FAILS_WITH(MPI_Send(buf, 1, MPI_INT, 9, 0, c), MPI_ERR_RANK);
    MPI_Comm freed = c;
    OK(MPI_Comm_free(&c));
    FAILS_WITH(MPI_Send(buf, 1, MPI_INT, peer, 0, freed), MPI_ERR_COMM);
    FAILS_WITH(MPI_Barrier(freed), MPI_ERR_COMM);

    /* Truncation, blocking: the status still says which message it was. */
    int big[100];
    for (int i = 0; i < 100; i++) big[i] = i;
    if (rank == 0) {
        OK(MPI_Send(big, 100, MPI_INT, 1, 9, MPI_COMM_WORLD));
        OK(MPI_Send(big, 3, MPI_INT, 1, 10, MPI_COMM_WORLD));
    } else {
        int small[10] = {0}, count = -1;
        st.MPI_SOURCE = st.MPI_TAG = -99;
        FAILS_WITH(MPI_Recv(small, 10, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 9, "truncated status: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
        OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 10, "truncated count %d", count);
        for (int i = 0; i < 10; i++) CHECK(small[i] == i, "truncated data [%d]", i);
        OK(MPI_Recv(small, 10, MPI_INT, 0, 10, MPI_COMM_WORLD, &st));
        CHECK(small[2] == 2, "the next message is intact");
    }
    /* Truncation, non-blocking, reported by Waitall as MPI_ERR_IN_STATUS. */
    if (rank == 0) {
        OK(MPI_Send(big, 50, MPI_INT, 1, 11, MPI_COMM_WORLD));
        OK(MPI_Send(big, 5, MPI_INT, 1, 12, MPI_COMM_WORLD));
    } else {
        int a[5], b[5];
        MPI_Request r[2];
        MPI_Status s[2];
        OK(MPI_Irecv(a, 5, MPI_INT, 0, 11, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Irecv(b, 5, MPI_INT, 0, 12, MPI_COMM_WORLD, &r[1]));
        FAILS_WITH(MPI_Waitall(2, r, s), MPI_ERR_IN_STATUS);
        CHECK(s[0].MPI_ERROR == MPI_ERR_TRUNCATE && s[1].MPI_ERROR == MPI_SUCCESS, "statuses' errors %d %d",
              s[0].MPI_ERROR, s[1].MPI_ERROR);
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "requests freed");
        CHECK(b[4] == 4 && a[4] == 4, "data");
    }

    /* Truncation of a large message (rendezvous), then one received whole. */
    int n = 1 << 20;
    unsigned char *huge = xmalloc((size_t)n);
    for (int i = 0; i < n; i++) huge[i] = (unsigned char)(i * 7 + 1);
    if (rank == 0) {
        OK(MPI_Send(huge, n, MPI_BYTE, 1, 13, MPI_COMM_WORLD));
        OK(MPI_Send(huge, n, MPI_BYTE, 1, 14, MPI_COMM_WORLD));
    } else {
        unsigned char small[1000];
        int count = -1;
        FAILS_WITH(MPI_Recv(small, 1000, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 13, "large truncated status: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
        OK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == 1000 && memcmp(small, huge, 1000) == 0, "large truncated: count %d", count);
        unsigned char *whole = xmalloc((size_t)n);
        OK(MPI_Recv(whole, n, MPI_BYTE, 0, 14, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == n && memcmp(whole, huge, (size_t)n) == 0, "the large message after it: count %d", count);
        free(whole);
    }
    free(huge);
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    /* Classes and strings: every class of MPICH's numbering (54 and 79-100 are unused). */
    for (int code = MPI_SUCCESS; code <= MPIX_ERR_REVOKED; code++) {
        if (code == 54 || (code > MPI_T_ERR_NOT_SUPPORTED && code < MPIX_ERR_PROC_FAILED)) {
            FAILS_WITH(MPI_Error_class(code, &len), MPI_ERR_ARG);
            continue;
        }
        CHECK(class_of(code) == code, "class of %d", code);
        OK(MPI_Error_string(code, text, &len));
        CHECK(len > 0 && len < MPI_MAX_ERROR_STRING, "string of %d", code);
    }
    OK(MPI_Error_string(MPI_ERR_TRUNCATE, text, &len));
    CHECK(strstr(text, "MPI_ERR_TRUNCATE") != NULL, "%s", text);
    int cl = 0;
    FAILS_WITH(MPI_Error_class(MPI_ERR_LASTCODE + 1, &cl), MPI_ERR_ARG);
    FAILS_WITH(MPI_Error_class(-4, &cl), MPI_ERR_ARG);

    /* Everything still works. */
    int one = 1, sum = 0;
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == 2, "allreduce after errors %d", sum);
    int x = rank, y = -1;
    OK(MPI_Sendrecv(&x, 1, MPI_INT, peer, 1, &y, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, &st));
    CHECK(y == peer, "sendrecv after errors %d", y);
    printf("OK errors %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
