/* A freed datatype stays valid while in use (MPI-4.1 §5.1.11): MPI_Type_free marks it for
 * deallocation, operations pending on it complete normally, types built from it stay valid. Also
 * MPI_Op_free of a user operation a pending MPI_Iallreduce uses (MPI-4.1 §6.9.5).
 *
 * Every case frees its types before the operation completes (or, for persistent requests, before
 * MPI_Start) and then makes other types, so that a freed handle slot given out again while a
 * request still refers to it by handle would show as wrong data. */
#include "check.h"

static int rank, size;

/* A fresh type of another layout, made to take a freed handle's slot. */
static MPI_Datatype decoy(void) {
    MPI_Datatype t;
    OK(MPI_Type_contiguous(3, MPI_DOUBLE, &t));
    OK(MPI_Type_commit(&t));
    return t;
}

static MPI_Datatype strided(int n, int stride) {
    MPI_Datatype t;
    OK(MPI_Type_vector(n, 1, stride, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    return t;
}

static int value(int from, int to, int i) { return from * 1000003 + to * 7919 + i; }

/* Isend to the right and Irecv from the left of `n` ints, every 2nd int sent, every 3rd received;
 * both types freed before MPI_Waitall. */
static void ring(int n) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *s = xmalloc(sizeof(int) * 2 * (size_t)n), *r = xmalloc(sizeof(int) * 3 * (size_t)n);
    for (int i = 0; i < 2 * n; i++) s[i] = i % 2 ? -7 : value(rank, right, i / 2);
    for (int i = 0; i < 3 * n; i++) r[i] = -1;
    MPI_Datatype st = strided(n, 2), rt = strided(n, 3);
    MPI_Request q[2];
    OK(MPI_Irecv(r, 1, rt, left, 5, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Isend(s, 1, st, right, 5, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Type_free(&st));
    OK(MPI_Type_free(&rt));
    CHECK(st == MPI_DATATYPE_NULL && rt == MPI_DATATYPE_NULL, "freed handles not set to NULL");
    MPI_Datatype d1 = decoy(), d2 = decoy();
    MPI_Status stv[2];
    OK(MPI_Waitall(2, q, stv));
    int got = -1;
    OK(MPI_Get_count(&stv[0], MPI_INT, &got));
    CHECK(got == n, "ring %d: count %d", n, got);
    for (int i = 0; i < 3 * n; i++) {
        int want = i % 3 ? -1 : value(left, rank, i / 3);
        CHECK(r[i] == want, "ring %d: r[%d] = %d, want %d", n, i, r[i], want);
    }
    OK(MPI_Type_free(&d1));
    OK(MPI_Type_free(&d2));
    free(s);
    free(r);
}

/* MPI_Ibcast from each root of `n` strided ints, the type freed before MPI_Wait. */
static void ibcast(int n) {
    int *b = xmalloc(sizeof(int) * 2 * (size_t)n);
    for (int root = 0; root < size; root++) {
        for (int i = 0; i < 2 * n; i++) b[i] = rank == root ? (i % 2 ? -7 : value(root, 0, i)) : -1;
        MPI_Datatype t = strided(n, 2);
        MPI_Request q;
        OK(MPI_Ibcast(b, 1, t, root, MPI_COMM_WORLD, &q));
        OK(MPI_Type_free(&t));
        MPI_Datatype d = decoy();
        OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (int i = 0; i < 2 * n; i++) {
            int want = i % 2 ? (rank == root ? -7 : -1) : value(root, 0, i);
            CHECK(b[i] == want, "ibcast %d root %d: b[%d] = %d, want %d", n, root, i, b[i], want);
        }
        OK(MPI_Type_free(&d));
    }
    free(b);
}

/* MPI_Ialltoallw with a strided type per peer on both sides (every 2nd int sent, every 3rd
 * received), all of them freed before MPI_Wait. */
static void ialltoallw(int n) {
    int *s = xmalloc(sizeof(int) * 2 * (size_t)n * (size_t)size);
    int *r = xmalloc(sizeof(int) * 3 * (size_t)n * (size_t)size);
    int *counts = xmalloc(sizeof(int) * (size_t)size), *sd = xmalloc(sizeof(int) * (size_t)size);
    int *rd = xmalloc(sizeof(int) * (size_t)size);
    MPI_Datatype *stypes = xmalloc(sizeof(MPI_Datatype) * (size_t)size);
    MPI_Datatype *rtypes = xmalloc(sizeof(MPI_Datatype) * (size_t)size);
    for (int j = 0; j < size; j++) {
        for (int i = 0; i < 2 * n; i++) s[2 * n * j + i] = i % 2 ? -7 : value(rank, j, i / 2);
        counts[j] = 1;
        sd[j] = (int)sizeof(int) * 2 * n * j;
        rd[j] = (int)sizeof(int) * 3 * n * j;
        stypes[j] = strided(n, 2);
        rtypes[j] = strided(n, 3);
    }
    for (int i = 0; i < 3 * n * size; i++) r[i] = -1;
    MPI_Request q;
    OK(MPI_Ialltoallw(s, counts, sd, stypes, r, counts, rd, rtypes, MPI_COMM_WORLD, &q));
    for (int j = 0; j < size; j++) {
        OK(MPI_Type_free(&stypes[j]));
        OK(MPI_Type_free(&rtypes[j]));
    }
    MPI_Datatype d1 = decoy(), d2 = decoy();
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < 3 * n; i++) {
            int want = i % 3 ? -1 : value(j, rank, i / 3);
            CHECK(r[3 * n * j + i] == want, "ialltoallw %d from %d: [%d] = %d, want %d", n, j, i, r[3 * n * j + i],
                  want);
        }
    OK(MPI_Type_free(&d1));
    OK(MPI_Type_free(&d2));
    free(s);
    free(r);
    free(counts);
    free(sd);
    free(rd);
    free(stypes);
    free(rtypes);
}

/* Persistent send and receive made with types freed before the first MPI_Start: the requests
 * keep them; started three times. */
static void persistent(int n) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *s = xmalloc(sizeof(int) * 2 * (size_t)n), *r = xmalloc(sizeof(int) * 3 * (size_t)n);
    MPI_Datatype st = strided(n, 2), rt = strided(n, 3);
    MPI_Request q[2];
    OK(MPI_Recv_init(r, 1, rt, left, 6, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Send_init(s, 1, st, right, 6, MPI_COMM_WORLD, &q[1]));
    OK(MPI_Type_free(&st));
    OK(MPI_Type_free(&rt));
    MPI_Datatype d1 = decoy(), d2 = decoy();
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2 * n; i++) s[i] = i % 2 ? -7 : value(rank, right, i / 2) + round;
        for (int i = 0; i < 3 * n; i++) r[i] = -1;
        OK(MPI_Startall(2, q));
        OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 3 * n; i++) {
            int want = i % 3 ? -1 : value(left, rank, i / 3) + round;
            CHECK(r[i] == want, "persistent %d round %d: r[%d] = %d, want %d", n, round, i, r[i], want);
        }
    }
    OK(MPI_Request_free(&q[0]));
    OK(MPI_Request_free(&q[1]));
    OK(MPI_Type_free(&d1));
    OK(MPI_Type_free(&d2));
    free(s);
    free(r);
}

/* A type built from a freed one stays valid: its layout, messages, its contents (the inner type
 * comes back as a new handle describing the same layout). */
static void derived_from_freed(void) {
    MPI_Datatype inner = strided(4, 2), outer;
    OK(MPI_Type_vector(3, 1, 2, inner, &outer));
    OK(MPI_Type_free(&inner));
    MPI_Datatype d = decoy();
    OK(MPI_Type_commit(&outer));
    int sz = -1;
    MPI_Aint lb = -1, ext = -1;
    OK(MPI_Type_size(outer, &sz));
    OK(MPI_Type_get_extent(outer, &lb, &ext));
    /* inner: 4 ints, extent 7 ints; outer: 3 of them 2 extents apart: (2*2+1)*7 ints. */
    CHECK(sz == 12 * (int)sizeof(int), "size %d", sz);
    CHECK(lb == 0 && ext == 35 * (MPI_Aint)sizeof(int), "lb %ld extent %ld", (long)lb, (long)ext);
    int ni, na, nd, comb;
    OK(MPI_Type_get_envelope(outer, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1, "envelope %d %d %d %d", ni, na, nd, comb);
    int ints[3];
    MPI_Datatype got;
    OK(MPI_Type_get_contents(outer, 3, 0, 1, ints, NULL, &got));
    OK(MPI_Type_get_envelope(got, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3, "inner envelope %d %d", ni, comb);
    OK(MPI_Type_size(got, &sz));
    CHECK(sz == 4 * (int)sizeof(int), "inner size %d", sz);
    OK(MPI_Type_free(&got));

    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int s[35], r[35];
    for (int i = 0; i < 35; i++) s[i] = value(rank, right, i), r[i] = -1;
    OK(MPI_Sendrecv(s, 1, outer, right, 7, r, 1, outer, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int b = 0; b < 3; b++)
        for (int k = 0; k < 4; k++) {
            int at = b * 14 + k * 2;
            CHECK(r[at] == value(left, rank, at), "derived: r[%d] = %d", at, r[at]);
            r[at] = -1;
        }
    for (int i = 0; i < 35; i++) CHECK(r[i] == -1, "derived: r[%d] = %d written", i, r[i]);
    OK(MPI_Type_free(&outer));
    OK(MPI_Type_free(&d));
}

static void my_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* A user operation freed while an MPI_Iallreduce uses it; another made meanwhile. */
static void op_freed(int n) {
    int *a = xmalloc(sizeof(int) * (size_t)n), *b = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) a[i] = value(rank, 0, i) % 1000, b[i] = -1;
    MPI_Op op, other;
    OK(MPI_Op_create(my_sum, 1, &op));
    MPI_Request q;
    OK(MPI_Iallreduce(a, b, n, MPI_INT, op, MPI_COMM_WORLD, &q));
    OK(MPI_Op_free(&op));
    CHECK(op == MPI_OP_NULL, "freed op not set to NULL");
    OK(MPI_Op_create(my_sum, 0, &other));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) {
        int want = 0;
        for (int p = 0; p < size; p++) want += value(p, 0, i) % 1000;
        CHECK(b[i] == want, "op freed %d: b[%d] = %d, want %d", n, i, b[i], want);
    }
    OK(MPI_Op_free(&other));
    free(a);
    free(b);
}

/* Persistent collectives made with a type and a user operation freed before MPI_Start: the
 * requests keep them (as persistent point-to-point requests do); started twice. */
static void persistent_coll(int n) {
    int *b = xmalloc(sizeof(int) * 2 * (size_t)n), *a = xmalloc(sizeof(int) * (size_t)n);
    int *c = xmalloc(sizeof(int) * (size_t)n);
    MPI_Datatype t = strided(n, 2);
    MPI_Op op;
    OK(MPI_Op_create(my_sum, 1, &op));
    MPI_Request q[2];
    OK(MPI_Bcast_init(b, 1, t, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]));
    OK(MPI_Allreduce_init(a, c, n, MPI_INT, op, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]));
    OK(MPI_Type_free(&t));
    OK(MPI_Op_free(&op));
    MPI_Datatype d = decoy();
    MPI_Op other;
    OK(MPI_Op_create(my_sum, 0, &other));
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 2 * n; i++) b[i] = rank == size - 1 ? (i % 2 ? -7 : value(round, 0, i)) : -1;
        for (int i = 0; i < n; i++) a[i] = rank + i + round, c[i] = -1;
        OK(MPI_Startall(2, q));
        OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 2 * n; i++) {
            int want = i % 2 ? (rank == size - 1 ? -7 : -1) : value(round, 0, i);
            CHECK(b[i] == want, "bcast_init %d round %d: b[%d] = %d, want %d", n, round, i, b[i], want);
        }
        for (int i = 0; i < n; i++) {
            int want = size * (size - 1) / 2 + size * (i + round);
            CHECK(c[i] == want, "allreduce_init %d round %d: c[%d] = %d, want %d", n, round, i, c[i], want);
        }
    }
    OK(MPI_Request_free(&q[0]));
    OK(MPI_Request_free(&q[1]));
    OK(MPI_Type_free(&d));
    OK(MPI_Op_free(&other));
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    /* Persistent collectives only with PERSISTENT_COLL=1: their recipes resolve the handles again
     * at each MPI_Start, and do not hold them yet (datatype::hold, op::hold). */
    int coll = getenv("PERSISTENT_COLL") && atoi(getenv("PERSISTENT_COLL"));
    /* 1 KiB (eager) and 1 MiB (rendezvous) of data. */
    int ns[2] = {256, 262144};
    for (int k = 0; k < 2; k++) {
        ring(ns[k]);
        persistent(ns[k]);
        ibcast(ns[k]);
        ialltoallw(k == 0 ? ns[k] : ns[k] / 16);
        op_freed(k == 0 ? 1000 : 100000);
        if (coll) persistent_coll(k == 0 ? ns[k] : ns[k] / 16);
    }
    derived_from_freed();
    /* MPI_Type_free of a freed handle fails. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype t = decoy(), copy = t;
    OK(MPI_Type_free(&t));
    FAILS_WITH(MPI_Type_free(&copy), MPI_ERR_TYPE);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK type_free_in_use %d\n", rank);
    MPI_Finalize();
    return 0;
}
