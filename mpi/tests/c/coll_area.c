/* The shared collective areas (mpi/README.md, "Shared collective areas"): MPI_Barrier, MPI_Bcast, MPI_Reduce,
 * MPI_Allreduce, MPI_Gather, MPI_Scatter, MPI_Allgather and MPI_Alltoall on communicators within one node, at sizes
 * inside the 2 KiB banks and just past them (messages): every root, MPI_IN_PLACE, a non-commutative user operation (rank order), many consecutive calls (banks reused
 * while slow ranks still read), several communicators used alternately (a dup, a split by parity, WORLD reversed),
 * a communicator created and freed 40 times (areas recycled), and 12 at once (more than the node's areas: the rest
 * use messages). The driver counts the areas claimed and refused in the debug log (NEMESIS_LOG=mpi::coll::area=debug).
 * Prints "OK coll_area <rank>". */
#include "affine.h"

static int rank, size;

/* Bcast, Reduce and Allreduce of `n` ints on `comm` at every root, `rounds` times, checked. */
static void round_trip(MPI_Comm comm, int n, int rounds, int salt) {
    int me, p;
    OK(MPI_Comm_rank(comm, &me));
    OK(MPI_Comm_size(comm, &p));
    int *a = xmalloc(sizeof(int) * n), *b = xmalloc(sizeof(int) * n);
    for (int t = 0; t < rounds; t++) {
        for (int root = 0; root < p; root++) {
            for (int i = 0; i < n; i++) a[i] = me == root ? salt + t * 31 + root * 7 + i : -1;
            OK(MPI_Bcast(a, n, MPI_INT, root, comm));
            for (int i = 0; i < n; i++)
                CHECK(a[i] == salt + t * 31 + root * 7 + i, "bcast n=%d t=%d root=%d [%d] = %d", n, t, root, i, a[i]);
            for (int i = 0; i < n; i++) a[i] = me + i + t;
            memset(b, 0, sizeof(int) * n);
            OK(MPI_Reduce(a, b, n, MPI_INT, MPI_SUM, root, comm));
            if (me == root)
                for (int i = 0; i < n; i++)
                    CHECK(b[i] == p * (p - 1) / 2 + p * (i + t), "reduce n=%d root=%d [%d] = %d", n, root, i, b[i]);
            /* In place at the root. */
            if (me == root) {
                for (int i = 0; i < n; i++) b[i] = me + i + t;
                OK(MPI_Reduce(MPI_IN_PLACE, b, n, MPI_INT, MPI_MAX, root, comm));
                for (int i = 0; i < n; i++) CHECK(b[i] == p - 1 + i + t, "reduce in place [%d] = %d", i, b[i]);
            } else {
                OK(MPI_Reduce(a, NULL, n, MPI_INT, MPI_MAX, root, comm));
            }
        }
        OK(MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, comm));
        for (int i = 0; i < n; i++) CHECK(b[i] == p * (p - 1) / 2 + p * (i + t), "allreduce n=%d [%d] = %d", n, i, b[i]);
        for (int i = 0; i < n; i++) b[i] = me * (i + 1);
        OK(MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_INT, MPI_MIN, comm));
        for (int i = 0; i < n; i++) CHECK(b[i] == 0, "allreduce in place [%d] = %d", i, b[i]);
        OK(MPI_Barrier(comm));
    }
    free(a);
    free(b);
}

/* A non-commutative operation: composition of affine maps in rank order, Reduce at every root and Allreduce. */
static void rank_order(MPI_Comm comm, MPI_Op comp, int n) {
    int me, p;
    OK(MPI_Comm_rank(comm, &me));
    OK(MPI_Comm_size(comm, &p));
    affine *in = xmalloc(sizeof(affine) * n), *out = xmalloc(sizeof(affine) * n);
    for (int i = 0; i < n; i++) in[i] = map_of(me, i);
    for (int root = 0; root < p; root++) {
        memset(out, 0, sizeof(affine) * n);
        OK(MPI_Reduce(in, out, n, MPI_2INT, comp, root, comm));
        if (me == root)
            for (int i = 0; i < n; i++) {
                affine e = composed(p, i);
                CHECK(out[i].a == e.a && out[i].b == e.b, "reduce n=%d root=%d [%d] out of rank order", n, root, i);
            }
    }
    OK(MPI_Allreduce(in, out, n, MPI_2INT, comp, comm));
    for (int i = 0; i < n; i++) {
        affine e = composed(p, i);
        CHECK(out[i].a == e.a && out[i].b == e.b, "allreduce n=%d [%d] out of rank order", n, i);
    }
    free(in);
    free(out);
}

/* Gather, Scatter, Allgather, Alltoall of `n` ints per rank on `comm` at every root, in place too, checked. */
static void personal(MPI_Comm comm, int n, int salt) {
    int me, p;
    OK(MPI_Comm_rank(comm, &me));
    OK(MPI_Comm_size(comm, &p));
    int *mine = xmalloc(sizeof(int) * n), *all = xmalloc(sizeof(int) * n * p), *to = xmalloc(sizeof(int) * n * p);
#define VAL(from, to_, i) (salt * 1000003 + (from) * 1009 + (to_) * 101 + (i))
    for (int root = 0; root < p; root++) {
        for (int i = 0; i < n; i++) mine[i] = VAL(me, root, i);
        memset(all, 0, sizeof(int) * n * p);
        OK(MPI_Gather(mine, n, MPI_INT, all, n, MPI_INT, root, comm));
        if (me == root)
            for (int r = 0; r < p; r++)
                for (int i = 0; i < n; i++)
                    CHECK(all[r * n + i] == VAL(r, root, i), "gather n=%d root=%d from %d [%d]", n, root, r, i);
        if (me == root) {
            for (int r = 0; r < p; r++)
                for (int i = 0; i < n; i++) all[r * n + i] = r == me ? VAL(me, root, i) : -1;
            OK(MPI_Gather(MPI_IN_PLACE, n, MPI_INT, all, n, MPI_INT, root, comm));
            for (int r = 0; r < p; r++)
                for (int i = 0; i < n; i++) CHECK(all[r * n + i] == VAL(r, root, i), "gather in place [%d]", i);
        } else {
            OK(MPI_Gather(mine, n, MPI_INT, NULL, 0, MPI_INT, root, comm));
        }
        for (int r = 0; r < p; r++)
            for (int i = 0; i < n; i++) all[r * n + i] = VAL(root, r, i);
        memset(mine, 0, sizeof(int) * n);
        OK(MPI_Scatter(all, n, MPI_INT, mine, n, MPI_INT, root, comm));
        for (int i = 0; i < n; i++) CHECK(mine[i] == VAL(root, me, i), "scatter n=%d root=%d [%d]", n, root, i);
        if (me == root) {
            OK(MPI_Scatter(all, n, MPI_INT, MPI_IN_PLACE, n, MPI_INT, root, comm));
            for (int i = 0; i < n; i++) CHECK(all[me * n + i] == VAL(root, me, i), "scatter in place [%d]", i);
        } else {
            memset(mine, 0, sizeof(int) * n);
            OK(MPI_Scatter(NULL, 0, MPI_INT, mine, n, MPI_INT, root, comm));
            for (int i = 0; i < n; i++) CHECK(mine[i] == VAL(root, me, i), "scatter (2) [%d]", i);
        }
    }
    for (int i = 0; i < n; i++) mine[i] = VAL(me, 0, i);
    memset(all, 0, sizeof(int) * n * p);
    OK(MPI_Allgather(mine, n, MPI_INT, all, n, MPI_INT, comm));
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n; i++) CHECK(all[r * n + i] == VAL(r, 0, i), "allgather n=%d from %d [%d]", n, r, i);
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n; i++) all[r * n + i] = r == me ? VAL(me, 1, i) : -1;
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_INT, all, n, MPI_INT, comm));
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n; i++) CHECK(all[r * n + i] == VAL(r, 1, i), "allgather in place [%d]", i);
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n; i++) all[r * n + i] = VAL(me, r, i);
    memset(to, 0, sizeof(int) * n * p);
    OK(MPI_Alltoall(all, n, MPI_INT, to, n, MPI_INT, comm));
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n; i++) CHECK(to[r * n + i] == VAL(r, me, i), "alltoall n=%d from %d [%d]", n, r, i);
    OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_INT, all, n, MPI_INT, comm));
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n; i++) CHECK(all[r * n + i] == VAL(r, me, i), "alltoall in place [%d]", i);
#undef VAL
    free(mine);
    free(all);
    free(to);
}

/* An allreduce that tells the communicator's member 0 to claim an area (or fall back). */
static void touch(MPI_Comm comm, int expect) {
    int one = 1, got = 0;
    OK(MPI_Allreduce(&one, &got, 1, MPI_INT, MPI_SUM, comm));
    CHECK(got == expect, "allreduce of ones = %d, not %d", got, expect);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    MPI_Op comp;
    OK(MPI_Op_create(compose, 0, &comp));

    /* WORLD: inside the banks (1 int, 128 ints = 512 B, 512 ints = 2 KiB) and past them (513 ints). */
    const int counts[] = {1, 2, 128, 512, 513};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) round_trip(MPI_COMM_WORLD, counts[k], 3, (int)k);
    /* Blocks that fit every bank on up to 4 ranks (128 ints: 512 B, 2 KiB for scatter and alltoall), and past
     * (for scatter and alltoall: 129; for all: 513). */
    const int blocks[] = {1, 3, 128, 129, 513};
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) personal(MPI_COMM_WORLD, blocks[k], (int)k);
    for (int t = 0; t < 200; t++) personal(MPI_COMM_WORLD, 2, t);
    /* Many consecutive calls: a fast rank reuses a bank while slow ones may still read the other. */
    round_trip(MPI_COMM_WORLD, 2, 300, 99);
    for (int i = 0; i < 2000; i++) OK(MPI_Barrier(MPI_COMM_WORLD));
    rank_order(MPI_COMM_WORLD, comp, 1);
    rank_order(MPI_COMM_WORLD, comp, 250);  /* 2000 B: in the banks */
    rank_order(MPI_COMM_WORLD, comp, 1000); /* 8000 B: messages */

    /* Several communicators used alternately: a dup, a split by parity, WORLD reversed (member 0 = last rank). */
    MPI_Comm dup, half, rev;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev));
    int rr;
    OK(MPI_Comm_rank(rev, &rr));
    CHECK(rr == size - 1 - rank, "reversed rank %d", rr);
    for (int t = 0; t < 20; t++) {
        round_trip(dup, 3, 1, t);
        round_trip(half, 2, 1, t + 1);
        round_trip(MPI_COMM_WORLD, 1, 1, t + 2);
        round_trip(rev, 4, 1, t + 3);
        personal(rev, 2, t);
        personal(half, 3, t);
        rank_order(rev, comp, 3);
        rank_order(half, comp, 2);
    }
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&half));
    OK(MPI_Comm_free(&rev));

    /* Created and freed many times: the areas are recycled (the driver finds no refusal). */
    for (int t = 0; t < 40; t++) {
        MPI_Comm c;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        touch(c, size);
        round_trip(c, 1, 1, t);
        OK(MPI_Comm_free(&c));
    }

    /* More communicators than areas: those without one use messages, with the same results. */
    enum { MANY = 12 };
    MPI_Comm many[MANY];
    for (int k = 0; k < MANY; k++) {
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &many[k]));
        touch(many[k], size);
    }
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < MANY; k++) {
            round_trip(many[k], 2, 1, k);
            personal(many[k], 1, k);
            rank_order(many[k], comp, 2);
        }
    for (int k = 0; k < MANY; k++) OK(MPI_Comm_free(&many[k]));

    OK(MPI_Op_free(&comp));
    printf("OK coll_area %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
