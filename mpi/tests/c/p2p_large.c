/* Large counts: the _c forms of point-to-point with counts above 2^31.
 * Rank 0 sends 2^31 + 64 MPI_BYTEs to rank 1 (Send_c/Recv_c), then the same bytes as 2^31 + 64
 * elements of a derived 1-byte type (Isend_c/Irecv_c); rank 1 checks every byte, and that
 * MPI_Get_count says MPI_UNDEFINED where MPI_Get_count_c and MPI_Get_elements_c give the count.
 * Every other _c form runs with a small count; bad counts fail with MPI_ERR_COUNT. Ranks past 1
 * only take part in the small checks. */
#include "check.h"

#include <stdint.h>

#define BIG ((MPI_Count)(1L << 31) + 64)

static unsigned char pattern(size_t i) {
    return (unsigned char)(i * 2654435761u >> 13);
}

static void fill(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = pattern(i);
}

static void verify(const unsigned char *p, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != pattern(i)) CHECK(0, "%s: byte %zu is %d, expected %d", what, i, p[i], pattern(i));
    }
}

static void check_counts(const MPI_Status *st, MPI_Datatype t, MPI_Count want) {
    int n = 0;
    MPI_Count c = 0;
    OK(MPI_Get_count(st, t, &n));
    CHECK(n == MPI_UNDEFINED, "Get_count of a count past INT_MAX: %d", n);
    OK(MPI_Get_count_c(st, t, &c));
    CHECK(c == want, "Get_count_c: %ld, expected %ld", (long)c, (long)want);
    OK(MPI_Get_elements_c(st, t, &c));
    CHECK(c == want, "Get_elements_c: %ld", (long)c);
    OK(MPI_Get_elements(st, t, &n));
    CHECK(n == MPI_UNDEFINED, "Get_elements: %d", n);
}

static void large(int rank) {
    unsigned char *buf = malloc((size_t)BIG);
    CHECK(buf != NULL, "cannot allocate %ld bytes", (long)BIG);
    MPI_Datatype one;
    OK(MPI_Type_contiguous(1, MPI_BYTE, &one));
    OK(MPI_Type_commit(&one));
    MPI_Status st;
    if (rank == 0) {
        fill(buf, (size_t)BIG);
        OK(MPI_Send_c(buf, BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
        MPI_Request r;
        OK(MPI_Isend_c(buf, BIG, one, 1, 2, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        memset(buf, 0, (size_t)BIG);
        OK(MPI_Recv_c(buf, BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st));
        verify(buf, (size_t)BIG, "Recv_c of MPI_BYTE");
        check_counts(&st, MPI_BYTE, BIG);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 1, "status %d %d", st.MPI_SOURCE, st.MPI_TAG);
        memset(buf, 0, (size_t)BIG);
        MPI_Request r;
        OK(MPI_Irecv_c(buf, BIG, one, 0, 2, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, &st));
        verify(buf, (size_t)BIG, "Irecv_c of a derived 1-byte type");
        check_counts(&st, one, BIG);
        /* A status set past INT_MAX reads back through the large-count calls. */
        OK(MPI_Status_set_elements_c(&st, MPI_SHORT, BIG));
        MPI_Count c = 0;
        OK(MPI_Get_count_c(&st, MPI_SHORT, &c));
        CHECK(c == BIG, "Status_set_elements_c then Get_count_c: %ld", (long)c);
    }
    OK(MPI_Type_free(&one));
    free(buf);
}

/* Every other _c form with small counts, between neighbours in a ring. */
static void small(int rank, int size) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[8], in[8];
    MPI_Status st;
    MPI_Request rs[2];
    for (int i = 0; i < 8; i++) out[i] = rank * 100 + i;

    OK(MPI_Sendrecv_c(out, 8, MPI_INT, right, 3, in, 8, MPI_INT, left, 3, MPI_COMM_WORLD, &st));
    for (int i = 0; i < 8; i++) CHECK(in[i] == left * 100 + i, "Sendrecv_c [%d] = %d", i, in[i]);
    MPI_Count c = -1;
    OK(MPI_Get_count_c(&st, MPI_INT, &c));
    CHECK(c == 8, "Sendrecv_c count %ld", (long)c);

    memcpy(in, out, sizeof out);
    OK(MPI_Sendrecv_replace_c(in, 8, MPI_INT, right, 4, left, 4, MPI_COMM_WORLD, &st));
    for (int i = 0; i < 8; i++) CHECK(in[i] == left * 100 + i, "Sendrecv_replace_c [%d] = %d", i, in[i]);

    /* Synchronous, ready and buffered sends. */
    OK(MPI_Irecv_c(in, 8, MPI_INT, left, 5, MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Rsend_c(out, 8, MPI_INT, right, 5, MPI_COMM_WORLD));
    OK(MPI_Wait(&rs[0], MPI_STATUS_IGNORE));
    OK(MPI_Irecv_c(in, 8, MPI_INT, left, 6, MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Ssend_c(out, 8, MPI_INT, right, 6, MPI_COMM_WORLD));
    OK(MPI_Wait(&rs[0], MPI_STATUS_IGNORE));
    MPI_Count bsize = 4096;
    void *bbuf = malloc((size_t)bsize);
    OK(MPI_Buffer_attach_c(bbuf, bsize));
    OK(MPI_Bsend_c(out, 8, MPI_INT, right, 7, MPI_COMM_WORLD));
    OK(MPI_Recv_c(in, 8, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(in[7] == left * 100 + 7, "Bsend_c");
    OK(MPI_Ibsend_c(out, 8, MPI_INT, right, 8, MPI_COMM_WORLD, &rs[1]));
    OK(MPI_Recv_c(in, 8, MPI_INT, left, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&rs[1], MPI_STATUS_IGNORE));
    void *back;
    MPI_Count bsize2 = 0;
    OK(MPI_Buffer_detach_c(&back, &bsize2));
    CHECK(back == bbuf && bsize2 == bsize, "Buffer_detach_c gave %p %ld", back, (long)bsize2);
    free(bbuf);

    /* Non-blocking modes. */
    OK(MPI_Irecv_c(in, 8, MPI_INT, left, 9, MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Issend_c(out, 8, MPI_INT, right, 9, MPI_COMM_WORLD, &rs[1]));
    OK(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
    OK(MPI_Irecv_c(in, 8, MPI_INT, left, 10, MPI_COMM_WORLD, &rs[0]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Irsend_c(out, 8, MPI_INT, right, 10, MPI_COMM_WORLD, &rs[1]));
    OK(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
    CHECK(in[3] == left * 100 + 3, "Irsend_c");

    /* Persistent requests, each mode, started twice. */
    for (int mode = 0; mode < 4; mode++) {
        MPI_Request p[2];
        OK(MPI_Recv_init_c(in, 8, MPI_INT, left, 11 + mode, MPI_COMM_WORLD, &p[0]));
        if (mode == 0) OK(MPI_Send_init_c(out, 8, MPI_INT, right, 11, MPI_COMM_WORLD, &p[1]));
        if (mode == 1) OK(MPI_Ssend_init_c(out, 8, MPI_INT, right, 12, MPI_COMM_WORLD, &p[1]));
        if (mode == 2) OK(MPI_Rsend_init_c(out, 8, MPI_INT, right, 13, MPI_COMM_WORLD, &p[1]));
        if (mode == 3) OK(MPI_Bsend_init_c(out, 8, MPI_INT, right, 14, MPI_COMM_WORLD, &p[1]));
        void *b = malloc(1024);
        if (mode == 3) OK(MPI_Buffer_attach(b, 1024));
        for (int round = 0; round < 2; round++) {
            memset(in, 0, sizeof in);
            OK(MPI_Start(&p[0]));
            OK(MPI_Barrier(MPI_COMM_WORLD)); /* every receive posted before a ready send */
            OK(MPI_Start(&p[1]));
            OK(MPI_Waitall(2, p, MPI_STATUSES_IGNORE));
            for (int i = 0; i < 8; i++) CHECK(in[i] == left * 100 + i, "persistent mode %d [%d] = %d", mode, i, in[i]);
        }
        if (mode == 3) {
            int sz;
            OK(MPI_Buffer_detach(&b, &sz));
        }
        free(b);
        OK(MPI_Request_free(&p[0]));
        OK(MPI_Request_free(&p[1]));
    }

    /* Matched probes. */
    OK(MPI_Isend_c(out, 8, MPI_INT, right, 20, MPI_COMM_WORLD, &rs[1]));
    MPI_Message m;
    OK(MPI_Mprobe(left, 20, MPI_COMM_WORLD, &m, &st));
    OK(MPI_Mrecv_c(in, 8, MPI_INT, &m, &st));
    CHECK(in[5] == left * 100 + 5, "Mrecv_c");
    OK(MPI_Wait(&rs[1], MPI_STATUS_IGNORE));
    OK(MPI_Isend_c(out, 8, MPI_INT, right, 21, MPI_COMM_WORLD, &rs[1]));
    OK(MPI_Mprobe(left, 21, MPI_COMM_WORLD, &m, &st));
    OK(MPI_Imrecv_c(in, 8, MPI_INT, &m, &rs[0]));
    OK(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
    CHECK(in[6] == left * 100 + 6, "Imrecv_c");

    /* Bad input: the error classes the standard names. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Send_c(out, -1, MPI_INT, right, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Send_c(out, -((MPI_Count)1 << 40), MPI_INT, right, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Recv_c(in, -5, MPI_INT, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Isend_c(NULL, (MPI_Count)1 << 33, MPI_INT, right, 0, MPI_COMM_WORLD, &rs[0]), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Send_c(out, 1, MPI_DATATYPE_NULL, right, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    FAILS_WITH(MPI_Send_c(out, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    FAILS_WITH(MPI_Send_c(out, 1, MPI_INT, right, -3, MPI_COMM_WORLD), MPI_ERR_TAG);
    FAILS_WITH(MPI_Buffer_attach_c(out, -1), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Get_count_c(&st, MPI_DATATYPE_NULL, &c), MPI_ERR_TYPE);
    /* MPI_PROC_NULL completes at once. */
    OK(MPI_Send_c(out, 8, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv_c(in, 8, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL source %d", st.MPI_SOURCE);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    small(rank, size);
    /* The large transfers: only with 2 ranks (each holds one 2 GiB buffer). */
    if (size == 2 && getenv("P2P_LARGE_SKIP") == NULL) large(rank);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK p2p_large %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
