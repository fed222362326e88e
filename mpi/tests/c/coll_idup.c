/* MPI_Comm_idup beside other collectives: non-blocking collectives started on the parent while
 * idups of it are pending (Ibarrier, Ibcast, Iallreduce, Iscan, each paired with an idup, several
 * in flight, completed by one Waitall), their results checked; non-blocking and blocking
 * collectives on the new communicators once complete; an idup of one communicator and an
 * Iallreduce of another started in opposite orders on different ranks; MPI_Comm_create_group
 * on the parent while an idup of it is pending (before the idup on even ranks, after it on odd
 * ranks) and a Comm_split meanwhile. Prints "OK coll_idup <rank>". */
#include "check.h"

#define ITERS 5

static int rank, size;

/* `c` is a working copy of a communicator of `n` ranks where this rank is `r`. */
static void use(MPI_Comm c, int n, int r) {
    int cn, cr;
    OK(MPI_Comm_size(c, &cn));
    OK(MPI_Comm_rank(c, &cr));
    CHECK(cn == n && cr == r, "size %d rank %d, expected %d %d", cn, cr, n, r);
    int in = r + 1, out = -1, b = (r == 0) ? 4242 : -1;
    MPI_Request q[3];
    OK(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, c, &q[0]));
    OK(MPI_Ibcast(&b, 1, MPI_INT, 0, c, &q[1]));
    OK(MPI_Ibarrier(c, &q[2]));
    OK(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    CHECK(out == n * (n + 1) / 2, "iallreduce on the new communicator: %d", out);
    CHECK(b == 4242, "ibcast on the new communicator: %d", b);
    int s = 0;
    OK(MPI_Allreduce(&in, &s, 1, MPI_INT, MPI_SUM, c));
    CHECK(s == n * (n + 1) / 2, "allreduce on the new communicator: %d", s);
    int got = -1;
    OK(MPI_Sendrecv(&r, 1, MPI_INT, (r + 1) % n, 7, &got, 1, MPI_INT, (r + n - 1) % n, 7, c, MPI_STATUS_IGNORE));
    CHECK(got == (r + n - 1) % n, "ring got %d", got);
}

/* Each round starts an NBC of kind `k` on `parent` then an idup of it, ITERS times. */
static void nbc_with_idups(MPI_Comm parent, int k) {
    int n, r;
    OK(MPI_Comm_size(parent, &n));
    OK(MPI_Comm_rank(parent, &r));
    MPI_Comm fresh[ITERS];
    MPI_Request q[2 * ITERS];
    int in[ITERS], out[ITERS];
    for (int i = 0; i < ITERS; i++) {
        in[i] = (r == 0) ? 815 + i : r + 1;
        out[i] = -1;
        /* Odd rounds start the idup first (in the same order on every rank). */
        if (i % 2) OK(MPI_Comm_idup(parent, &fresh[i], &q[ITERS + i]));
        switch (k) {
        case 0: OK(MPI_Ibarrier(parent, &q[i])); break;
        case 1: OK(MPI_Ibcast(&in[i], 1, MPI_INT, 0, parent, &q[i])); break;
        case 2: OK(MPI_Iallreduce(&in[i], &out[i], 1, MPI_INT, MPI_SUM, parent, &q[i])); break;
        default: OK(MPI_Iscan(&r, &out[i], 1, MPI_INT, MPI_SUM, parent, &q[i])); break;
        }
        if (i % 2 == 0) OK(MPI_Comm_idup(parent, &fresh[i], &q[ITERS + i]));
    }
    OK(MPI_Waitall(2 * ITERS, q, MPI_STATUSES_IGNORE));
    int sum = 815 + n * (n + 1) / 2 - 1;
    for (int i = 0; i < ITERS; i++) {
        switch (k) {
        case 1: CHECK(in[i] == 815 + i, "ibcast %d: %d", i, in[i]); break;
        case 2: CHECK(out[i] == sum + i, "iallreduce %d: %d, expected %d", i, out[i], sum + i); break;
        case 3: CHECK(out[i] == r * (r + 1) / 2, "iscan %d: %d", i, out[i]); break;
        default: break;
        }
        use(fresh[i], n, r);
    }
    for (int i = 0; i < ITERS; i++) OK(MPI_Comm_free(&fresh[i]));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;

    /* NBCs on the parent while its idups are pending, on WORLD and on a dup of it. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    for (int k = 0; k < 4; k++) {
        nbc_with_idups(MPI_COMM_WORLD, k);
        nbc_with_idups(dup, k);
    }

    /* One idup, then an Iallreduce on the parent; the new communicator used for NBCs. */
    {
        MPI_Comm fresh;
        MPI_Request q[2];
        int in = 1, out = -1;
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &fresh, &q[0]));
        OK(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[1]));
        OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        CHECK(out == size, "iallreduce beside an idup: %d", out);
        use(fresh, size, rank);
        OK(MPI_Comm_free(&fresh));
    }

    /* Idup of `dup` and Iallreduce of WORLD started in opposite orders on different ranks. */
    {
        MPI_Comm fresh;
        MPI_Request q[2];
        int in = 1, out = -1;
        if (rank == 0) {
            OK(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
            OK(MPI_Comm_idup(dup, &fresh, &q[1]));
        } else {
            OK(MPI_Comm_idup(dup, &fresh, &q[1]));
            OK(MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]));
        }
        OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        CHECK(out == size, "iallreduce beside an idup of another communicator: %d", out);
        use(fresh, size, rank);
        OK(MPI_Comm_free(&fresh));
    }

    /* Comm_create_group on the parent while an idup of it is pending, in both orders. */
    for (int round = 0; round < 3; round++) {
        MPI_Group g;
        MPI_Comm grp, fresh, split;
        MPI_Request q;
        OK(MPI_Comm_group(MPI_COMM_WORLD, &g));
        if (rank % 2 == 0) {
            OK(MPI_Comm_create_group(MPI_COMM_WORLD, g, round, &grp));
            OK(MPI_Comm_idup(MPI_COMM_WORLD, &fresh, &q));
        } else {
            OK(MPI_Comm_idup(MPI_COMM_WORLD, &fresh, &q));
            OK(MPI_Comm_create_group(MPI_COMM_WORLD, g, round, &grp));
        }
        /* A blocking creation over the parent with the idup still pending. */
        OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &split));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK(grp != MPI_COMM_NULL && fresh != MPI_COMM_NULL, "null communicators");
        use(fresh, size, rank);
        use(grp, size, rank);
        use(split, size, rank);
        OK(MPI_Barrier(fresh));
        OK(MPI_Barrier(grp));
        OK(MPI_Comm_free(&fresh));
        OK(MPI_Comm_free(&grp));
        OK(MPI_Comm_free(&split));
        OK(MPI_Group_free(&g));
    }

    /* Create_group of half of WORLD beside an idup of WORLD. */
    {
        MPI_Group wg, half;
        MPI_Comm grp = MPI_COMM_NULL, fresh;
        MPI_Request q;
        int lo = (size + 1) / 2, range[1][3] = {{0, lo - 1, 1}};
        OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        OK(MPI_Group_range_incl(wg, 1, range, &half));
        OK(MPI_Comm_idup(MPI_COMM_WORLD, &fresh, &q));
        if (rank < lo) OK(MPI_Comm_create_group(MPI_COMM_WORLD, half, 99, &grp));
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        if (rank < lo) {
            use(grp, lo, rank);
            OK(MPI_Comm_free(&grp));
        }
        use(fresh, size, rank);
        OK(MPI_Comm_free(&fresh));
        OK(MPI_Group_free(&half));
        OK(MPI_Group_free(&wg));
    }

    OK(MPI_Comm_free(&dup));
    OK(MPI_Finalize());
    printf("OK coll_idup %d\n", rank);
    return 0;
}
