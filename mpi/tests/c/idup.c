/* MPI_Comm_idup: several in flight on one communicator and on two, interleaved with an
 * MPI_Ibarrier, an MPI_Iallreduce and blocking collectives, overlapped with computation (the
 * requests advance while the program tests another one), a blocking MPI_Comm_dup issued while
 * idups are in flight; attributes copied by their callbacks; the new communicators used for
 * point-to-point (ANY_SOURCE) and collectives, compared and freed; many rounds. Prints
 * "OK idup <rank>". */
#include "check.h"

static int rank, size;
static int copies;

static int copy_fn(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag) {
    (void)old, (void)key, (void)extra;
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

/* `c` is a working copy of `parent`. */
static void use(MPI_Comm c, MPI_Comm parent, int tag) {
    int n, r, pn, pr, res;
    OK(MPI_Comm_size(c, &n));
    OK(MPI_Comm_rank(c, &r));
    OK(MPI_Comm_size(parent, &pn));
    OK(MPI_Comm_rank(parent, &pr));
    CHECK(n == pn && r == pr, "size %d rank %d", n, r);
    OK(MPI_Comm_compare(c, parent, &res));
    CHECK(res == MPI_CONGRUENT, "compare %d", res);
    int got = -1;
    MPI_Status st;
    OK(MPI_Sendrecv(&r, 1, MPI_INT, (r + 1) % n, tag, &got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st));
    CHECK(got == (r + n - 1) % n && st.MPI_SOURCE == got && st.MPI_TAG == tag, "ring got %d tag %d", got, st.MPI_TAG);
    int s = 0;
    OK(MPI_Allreduce(&r, &s, 1, MPI_INT, MPI_SUM, c));
    CHECK(s == n * (n - 1) / 2, "allreduce %d", s);
}

/* Busy work, testing `req` now and then; true once it completed. */
static int compute_while(MPI_Request *req) {
    volatile double x = 0;
    int done = 0;
    for (int i = 0; i < 200 && !done; i++) {
        for (int k = 0; k < 2000; k++) x += k * 0.5;
        OK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    }
    return done;
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    static char base[4];
    int key;
    OK(MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &key, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_WORLD, key, base));

    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    int rounds = getenv("IDUP_ROUNDS") ? atoi(getenv("IDUP_ROUNDS")) : 20;
    for (int round = 0; round < rounds; round++) {
        /* Three idups on WORLD, one on the half, an Ibarrier and an Iallreduce among them. */
        MPI_Comm d[4] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
        MPI_Request rq[6];
        int v = rank + 1, sum = 0;
        copies = 0;
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[0], &rq[0]));
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &rq[1]));
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[1], &rq[2]));
        OK(MPI_Comm_idup(half, &d[2], &rq[3]));
        OK(MPI_Iallreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[4]));
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[3], &rq[5]));
        CHECK(copies == 3, "copy callbacks at the calls: %d", copies);
        /* Computation while they advance (testing the first one). */
        compute_while(&rq[0]);
        if (round % 3 == 1) {
            /* A blocking dup while the others may still be in flight. */
            MPI_Comm b;
            OK(MPI_Comm_dup(MPI_COMM_WORLD, &b));
            use(b, MPI_COMM_WORLD, 11);
            OK(MPI_Comm_free(&b));
        }
        if (round % 2 == 0) {
            OK(MPI_Waitall(6, rq, MPI_STATUSES_IGNORE));
        } else {
            /* In reverse, one by one. */
            for (int k = 5; k >= 0; k--) OK(MPI_Wait(&rq[k], MPI_STATUS_IGNORE));
        }
        CHECK(sum == size * (size + 1) / 2, "iallreduce %d", sum);
        for (int k = 0; k < 4; k++) CHECK(d[k] != MPI_COMM_NULL, "idup %d gave a communicator", k);
        CHECK(d[0] != d[1] && d[1] != d[3] && d[0] != d[3], "distinct handles");
        void *val = NULL;
        int flag = 0;
        OK(MPI_Comm_get_attr(d[1], key, &val, &flag));
        CHECK(flag && val == base + 1, "attribute copied");
        OK(MPI_Comm_get_attr(d[2], key, &val, &flag));
        CHECK(!flag, "half has no attribute");
        /* Messages on one must not reach another: post on d[0], send on d[1] first. */
        int a = -1, b2 = -1, peer = (rank + 1) % size, from = (rank + size - 1) % size;
        MPI_Request r2[2];
        OK(MPI_Irecv(&a, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, d[0], &r2[0]));
        OK(MPI_Irecv(&b2, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, d[1], &r2[1]));
        int x1 = 1000 + rank, x0 = rank;
        OK(MPI_Send(&x1, 1, MPI_INT, peer, 1, d[1]));
        OK(MPI_Send(&x0, 1, MPI_INT, peer, 0, d[0]));
        OK(MPI_Waitall(2, r2, MPI_STATUSES_IGNORE));
        CHECK(a == from && b2 == 1000 + from, "isolation: %d %d", a, b2);
        use(d[0], MPI_COMM_WORLD, 1);
        use(d[1], MPI_COMM_WORLD, 2);
        use(d[2], half, 3);
        use(d[3], MPI_COMM_WORLD, 4);
        /* An idup of an idup's communicator. */
        MPI_Comm dd;
        MPI_Request r3;
        OK(MPI_Comm_idup(d[3], &dd, &r3));
        OK(MPI_Wait(&r3, MPI_STATUS_IGNORE));
        use(dd, MPI_COMM_WORLD, 5);
        OK(MPI_Comm_free(&dd));
        for (int k = 0; k < 4; k++) OK(MPI_Comm_free(&d[k]));
    }
    /* Idup freed before use: its communicator is still made, then freed. */
    MPI_Comm e;
    MPI_Request re;
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &e, &re));
    OK(MPI_Wait(&re, MPI_STATUS_IGNORE));
    OK(MPI_Comm_free(&e));
    /* Argument errors. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Comm_idup(MPI_COMM_WORLD, &e, NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Comm_idup(MPI_COMM_NULL, &e, &re), MPI_ERR_COMM);
    OK(MPI_Comm_free(&half));
    OK(MPI_Comm_free_keyval(&key));
    printf("OK idup %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
