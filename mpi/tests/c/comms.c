/* Communicators: MPI_Comm_split (by parity with reversed keys, by thirds with tied keys,
 * MPI_UNDEFINED), MPI_Comm_dup, splits of splits, MPI_Comm_free, point-to-point and collectives
 * on the new communicators with their ranks in statuses, the isolation of communicators from one
 * another and of collectives from point-to-point traffic, MPI_COMM_SELF, and many dup/free
 * rounds. Prints "OK comms <rank>". */
#include "check.h"

static int rank, size;

/* A ring on `comm` with ANY_SOURCE receives: the status must name the communicator rank. */
static void ring_on(MPI_Comm comm) {
    int r, n;
    OK(MPI_Comm_rank(comm, &r));
    OK(MPI_Comm_size(comm, &n));
    int next = (r + 1) % n, prev = (r + n - 1) % n, got = -1;
    MPI_Status st;
    OK(MPI_Sendrecv(&r, 1, MPI_INT, next, 9, &got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
    CHECK(got == prev && st.MPI_SOURCE == prev && st.MPI_TAG == 9, "ring: got %d from %d (expected %d)", got,
          st.MPI_SOURCE, prev);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;

    /* Split by parity, keys reversing the order. */
    MPI_Comm par;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &par));
    int pr, pn, want_n = 0, want_r = 0;
    for (int r = 0; r < size; r++)
        if (r % 2 == rank % 2) {
            want_n++;
            if (r > rank) want_r++;
        }
    OK(MPI_Comm_rank(par, &pr));
    OK(MPI_Comm_size(par, &pn));
    CHECK(pn == want_n && pr == want_r, "parity split: rank %d of %d, expected %d of %d", pr, pn, want_r, want_n);
    ring_on(par);
    /* Collectives on it: the sum of the world ranks of my parity; rank 0 of it is the highest. */
    int sum = 0, want_sum = 0;
    for (int r = rank % 2; r < size; r += 2) want_sum += r;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, par));
    CHECK(sum == want_sum, "parity allreduce %d, expected %d", sum, want_sum);
    int top = rank;
    OK(MPI_Bcast(&top, 1, MPI_INT, 0, par));
    int want_top = (size - 1) % 2 == rank % 2 ? size - 1 : size - 2;
    CHECK(top == want_top, "parity bcast from its rank 0: %d, expected %d", top, want_top);
    int *ranks = xmalloc(sizeof(int) * (size_t)pn);
    OK(MPI_Gather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, pn - 1, par));
    if (pr == pn - 1)
        for (int i = 0; i < pn; i++) {
            int w = -1, k = 0;
            for (int r = size - 1; r >= 0; r--)
                if (r % 2 == rank % 2 && k++ == i) w = r;
            CHECK(ranks[i] == w, "parity gather [%d] = %d, expected %d", i, ranks[i], w);
        }
    free(ranks);

    /* Split by thirds with equal keys: the parent's order is kept; rank 0 sits out. */
    MPI_Comm third;
    int color = rank == 0 ? MPI_UNDEFINED : rank / 3;
    OK(MPI_Comm_split(MPI_COMM_WORLD, color, 5, &third));
    if (rank == 0) {
        CHECK(third == MPI_COMM_NULL, "MPI_UNDEFINED must give MPI_COMM_NULL");
    } else {
        int tr, tn, lo = rank / 3 * 3 == 0 ? 1 : rank / 3 * 3, hi = rank / 3 * 3 + 3;
        if (hi > size) hi = size;
        OK(MPI_Comm_rank(third, &tr));
        OK(MPI_Comm_size(third, &tn));
        CHECK(tn == hi - lo && tr == rank - lo, "thirds: rank %d of %d", tr, tn);
        ring_on(third);
        /* A split of a split: everyone alone. */
        MPI_Comm alone;
        OK(MPI_Comm_split(third, tr, 0, &alone));
        int ar, an;
        OK(MPI_Comm_rank(alone, &ar));
        OK(MPI_Comm_size(alone, &an));
        CHECK(ar == 0 && an == 1, "alone: %d of %d", ar, an);
        ring_on(alone);
        OK(MPI_Comm_free(&alone));
        CHECK(alone == MPI_COMM_NULL, "freed handle not nulled");
        OK(MPI_Comm_free(&third));
    }

    /* Dup: same group, its own context. Rank 0 sends on the dup first, then on WORLD; a
     * wildcard receive on WORLD must get the WORLD message. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    int dr, dn;
    OK(MPI_Comm_rank(dup, &dr));
    OK(MPI_Comm_size(dup, &dn));
    CHECK(dr == rank && dn == size, "dup: %d of %d", dr, dn);
    if (size > 1) {
        if (rank == 0) {
            int a = 111, b = 222;
            OK(MPI_Send(&a, 1, MPI_INT, 1, 5, dup));
            OK(MPI_Send(&b, 1, MPI_INT, 1, 5, MPI_COMM_WORLD));
        } else if (rank == 1) {
            int x = 0;
            MPI_Status st;
            OK(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK(x == 222, "WORLD receive took %d (the dup's message?)", x);
            OK(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &st));
            CHECK(x == 111, "dup receive took %d", x);
        }
    }
    /* Collectives never match point-to-point receives: a wildcard receive posted before a
     * broadcast and a barrier stays pending through them. */
    if (size > 1) {
        MPI_Request req = MPI_REQUEST_NULL;
        int x = -1, flag = 1, v = rank == 0 ? 77 : 0;
        if (rank == 1) OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req));
        OK(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        CHECK(v == 77, "bcast value %d", v);
        if (rank == 1) {
            OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
            CHECK(flag == 0, "a collective's message matched a point-to-point receive (got %d)", x);
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) OK(MPI_Send(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD));
        if (rank == 1) {
            OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
            CHECK(x == 77, "the real message: %d", x);
        }
    }
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&par));

    /* Many dup/free rounds, each used by a collective and point to point (past the first 64
     * communicators, which the library serves from a fixed table). */
    for (int i = 0; i < 100; i++) {
        MPI_Comm c;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        int one = 1, n = 0;
        OK(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, c));
        CHECK(n == size, "round %d: allreduce %d", i, n);
        ring_on(c);
        OK(MPI_Comm_free(&c));
    }
    /* Communicators past the table, point to point with every path: blocking, non-blocking,
     * wildcards, PROC_NULL. */
    MPI_Comm many[70];
    for (int i = 0; i < 70; i++) OK(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &many[i]));
    for (int i = 0; i < 70; i += 23) {
        ring_on(many[i]);
        int r, n, v = rank, got = -1;
        OK(MPI_Comm_rank(many[i], &r));
        OK(MPI_Comm_size(many[i], &n));
        CHECK(r == size - 1 - rank && n == size, "reversed split: %d of %d", r, n);
        MPI_Request q[2];
        MPI_Status s2[2];
        OK(MPI_Irecv(&got, 1, MPI_INT, (r + n - 1) % n, 4, many[i], &q[0]));
        OK(MPI_Isend(&v, 1, MPI_INT, (r + 1) % n, 4, many[i], &q[1]));
        OK(MPI_Waitall(2, q, s2));
        CHECK(s2[0].MPI_SOURCE == (r + n - 1) % n, "status source %d", s2[0].MPI_SOURCE);
        CHECK(got == size - 1 - ((r + n - 1) % n), "got the world rank %d", got);
        OK(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, many[i]));
    }
    for (int i = 0; i < 70; i++) OK(MPI_Comm_free(&many[i]));

    /* MPI_COMM_SELF. */
    int sr, sn, v = 5 + rank, w = 0;
    OK(MPI_Comm_rank(MPI_COMM_SELF, &sr));
    OK(MPI_Comm_size(MPI_COMM_SELF, &sn));
    CHECK(sr == 0 && sn == 1, "self: %d of %d", sr, sn);
    OK(MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF));
    CHECK(w == v, "self allreduce %d", w);
    OK(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_SELF));
    OK(MPI_Gather(&v, 1, MPI_INT, &w, 1, MPI_INT, 0, MPI_COMM_SELF));
    CHECK(w == v, "self gather %d", w);
    OK(MPI_Barrier(MPI_COMM_SELF));
    MPI_Comm sdup;
    OK(MPI_Comm_dup(MPI_COMM_SELF, &sdup));
    ring_on(sdup);
    OK(MPI_Comm_free(&sdup));

    printf("OK comms %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
