/* The irregular collectives and the prefix reductions against results computed locally:
 * MPI_Gatherv and MPI_Scatterv at every root, MPI_Allgatherv, MPI_Alltoallv with counts that vary
 * by rank (zero included) and displacements with gaps, MPI_IN_PLACE where the standard allows it;
 * derived datatypes on either side (a strided vector against contiguous ints); MPI_Alltoallw with a
 * different datatype per peer; MPI_Reduce_scatter and MPI_Reduce_scatter_block (in place too);
 * MPI_Scan and MPI_Exscan with MPI_SUM and with a non-commutative user operation, which must
 * combine in rank order; MPI_MINLOC/MPI_MAXLOC on every C pair type in Reduce (every root), Allreduce,
 * Scan and Reduce_local; reductions on derived datatypes (a contiguous and a strided type of doubles).
 * A user's operation on a strided type (Allreduce, Scan, Iallreduce: called on the type's layout).
 * The regular collectives (Bcast, Gather, Scatter, Allgather, Alltoall) with a strided type on some
 * ranks and plain ints on others (both paths in one collective), in place, and a struct type.
 * A scale of 1 and 3000 (past the eager limit: transfers in pieces).
 * Buffer cells outside the blocks must stay untouched. Prints "OK vcoll <rank>". */
#include "affine.h"
#include <stddef.h>

static int rank, size;

static int val(int from, int to, int i) { return from * 100000 + to * 1000 + i % 997; }
static int cnt(int r, int scale) { return ((r * 7 + 3) % 5) * scale; } /* 0..4 × scale, zero included */

enum { GAP = 3, POISON = -77 };

/* Displacements with a gap of GAP elements between blocks; returns the total span. */
static int displs_of(const int *counts, int *displs) {
    int at = GAP;
    for (int r = 0; r < size; r++) {
        displs[r] = at;
        at += counts[r] + GAP;
    }
    return at;
}

static void test_gatherv_scatterv(int scale, MPI_Datatype strided) {
    int *counts = xmalloc(sizeof(int) * (size_t)size), *displs = xmalloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++) counts[r] = cnt(r, scale);
    int span = displs_of(counts, displs);
    int mine = cnt(rank, scale);
    int *send = xmalloc(sizeof(int) * (size_t)(mine + 1));
    int *all = xmalloc(sizeof(int) * (size_t)span);
    for (int root = 0; root < size; root++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            for (int i = 0; i < mine; i++) send[i] = val(rank, root, i);
            for (int i = 0; i < span; i++) all[i] = POISON;
            if (in_place && rank == root)
                for (int i = 0; i < mine; i++) all[displs[rank] + i] = val(rank, root, i);
            OK(MPI_Gatherv(in_place && rank == root ? MPI_IN_PLACE : send, mine, MPI_INT, all, counts, displs,
                           MPI_INT, root, MPI_COMM_WORLD));
            if (rank == root) {
                int k = 0;
                for (int r = 0; r < size; r++) {
                    for (; k < displs[r]; k++) CHECK(all[k] == POISON, "gatherv wrote the gap at %d", k);
                    for (int i = 0; i < counts[r]; i++, k++)
                        CHECK(all[k] == val(r, root, i), "gatherv root %d block %d [%d] = %d", root, r, i, all[k]);
                }
            }
            /* Scatterv back: the root's blocks, each rank gets its own. */
            if (rank == root)
                for (int r = 0; r < size; r++)
                    for (int i = 0; i < counts[r]; i++) all[displs[r] + i] = val(root, r, i);
            for (int i = 0; i < mine; i++) send[i] = POISON;
            send[mine] = POISON;
            OK(MPI_Scatterv(all, counts, displs, MPI_INT, in_place && rank == root ? MPI_IN_PLACE : send, mine,
                            MPI_INT, root, MPI_COMM_WORLD));
            if (!(in_place && rank == root))
                for (int i = 0; i < mine; i++)
                    CHECK(send[i] == val(root, rank, i), "scatterv root %d [%d] = %d", root, i, send[i]);
            CHECK(send[mine] == POISON, "scatterv wrote past the block");
        }
        /* A strided receive type at the root against contiguous ints: element i of block r at
         * all[2 * (displs[r] + i)]. */
        int *wide = xmalloc(sizeof(int) * 2 * (size_t)span);
        for (int i = 0; i < 2 * span; i++) wide[i] = POISON;
        for (int i = 0; i < mine; i++) send[i] = val(rank, root, i);
        OK(MPI_Gatherv(send, mine, MPI_INT, wide, counts, displs, strided, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < counts[r]; i++) {
                    CHECK(wide[2 * (displs[r] + i)] == val(r, root, i), "strided gatherv block %d [%d]", r, i);
                    CHECK(wide[2 * (displs[r] + i) + 1] == POISON, "strided gatherv wrote a hole");
                }
        free(wide);
    }
    free(counts);
    free(displs);
    free(send);
    free(all);
}

static void test_allgatherv(int scale, MPI_Datatype strided) {
    int *counts = xmalloc(sizeof(int) * (size_t)size), *displs = xmalloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++) counts[r] = cnt(r, scale);
    int span = displs_of(counts, displs);
    int mine = cnt(rank, scale);
    int *send = xmalloc(sizeof(int) * 2 * (size_t)(mine + 1));
    int *all = xmalloc(sizeof(int) * (size_t)span);
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < span; i++) all[i] = POISON;
        for (int i = 0; i < mine; i++) send[i] = val(rank, 0, i);
        if (in_place)
            for (int i = 0; i < mine; i++) all[displs[rank] + i] = val(rank, 0, i);
        OK(MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, mine, MPI_INT, all, counts, displs, MPI_INT,
                          MPI_COMM_WORLD));
        int k = 0;
        for (int r = 0; r < size; r++) {
            for (; k < displs[r]; k++) CHECK(all[k] == POISON, "allgatherv wrote the gap at %d", k);
            for (int i = 0; i < counts[r]; i++, k++)
                CHECK(all[k] == val(r, 0, i), "allgatherv (in place %d) block %d [%d] = %d", in_place, r, i, all[k]);
        }
    }
    /* A strided send type: every other int of `send`. */
    for (int i = 0; i < mine; i++) {
        send[2 * i] = val(rank, 1, i);
        send[2 * i + 1] = POISON;
    }
    OK(MPI_Allgatherv(send, mine, strided, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < counts[r]; i++) CHECK(all[displs[r] + i] == val(r, 1, i), "strided allgatherv");
    free(counts);
    free(displs);
    free(send);
    free(all);
}

static void test_alltoallv(int scale) {
    /* Rank r sends cnt(r + to) elements to `to`, so every pair has its own count. */
    int *sc = xmalloc(sizeof(int) * (size_t)size), *sd = xmalloc(sizeof(int) * (size_t)size);
    int *rc = xmalloc(sizeof(int) * (size_t)size), *rd = xmalloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++) {
        sc[r] = cnt(rank + r, scale);
        rc[r] = cnt(r + rank, scale);
    }
    int sspan = displs_of(sc, sd), rspan = displs_of(rc, rd);
    int *send = xmalloc(sizeof(int) * (size_t)sspan), *recv = xmalloc(sizeof(int) * (size_t)rspan);
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < sspan; i++) send[i] = POISON;
        for (int i = 0; i < rspan; i++) recv[i] = POISON;
        for (int to = 0; to < size; to++)
            for (int i = 0; i < sc[to]; i++) send[sd[to] + i] = val(rank, to, i);
        if (in_place) {
            /* In place the send counts are the receive counts (symmetric here by construction). */
            for (int to = 0; to < size; to++)
                for (int i = 0; i < rc[to]; i++) recv[rd[to] + i] = val(rank, to, i);
            OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd, MPI_INT, MPI_COMM_WORLD));
        } else {
            OK(MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, MPI_COMM_WORLD));
        }
        int k = 0;
        for (int from = 0; from < size; from++) {
            for (; k < rd[from]; k++) CHECK(recv[k] == POISON, "alltoallv wrote the gap at %d", k);
            for (int i = 0; i < rc[from]; i++, k++)
                CHECK(recv[k] == val(from, rank, i), "alltoallv (in place %d) from %d [%d] = %d", in_place, from, i,
                      recv[k]);
        }
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(send);
    free(recv);
}

static void test_alltoallw(int scale, MPI_Datatype strided) {
    /* To even peers ints, to odd peers every other int of a wide buffer (the strided type);
     * received as contiguous ints from everyone. Byte displacements. */
    int n = scale + 1;
    int *sc = xmalloc(sizeof(int) * (size_t)size), *sd = xmalloc(sizeof(int) * (size_t)size);
    int *rc = xmalloc(sizeof(int) * (size_t)size), *rd = xmalloc(sizeof(int) * (size_t)size);
    MPI_Datatype *st = xmalloc(sizeof(MPI_Datatype) * (size_t)size), *rt = xmalloc(sizeof(MPI_Datatype) * (size_t)size);
    int *send = xmalloc(sizeof(int) * 2 * (size_t)n * (size_t)size), *recv = xmalloc(sizeof(int) * (size_t)n * (size_t)size);
    for (int to = 0; to < size; to++) {
        sc[to] = n;
        sd[to] = (int)sizeof(int) * 2 * n * to;
        st[to] = to % 2 ? strided : MPI_INT;
        rc[to] = n;
        rd[to] = (int)sizeof(int) * n * to;
        rt[to] = MPI_INT;
        int *b = send + 2 * n * to;
        for (int i = 0; i < 2 * n; i++) b[i] = POISON;
        for (int i = 0; i < n; i++) b[to % 2 ? 2 * i : i] = val(rank, to, i);
    }
    for (int i = 0; i < n * size; i++) recv[i] = POISON;
    OK(MPI_Alltoallw(send, sc, sd, st, recv, rc, rd, rt, MPI_COMM_WORLD));
    for (int from = 0; from < size; from++)
        for (int i = 0; i < n; i++)
            CHECK(recv[n * from + i] == val(from, rank, i), "alltoallw from %d [%d] = %d", from, i, recv[n * from + i]);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(st);
    free(rt);
    free(send);
    free(recv);
}

static void test_reduce_scatter(int scale) {
    int *counts = xmalloc(sizeof(int) * (size_t)size);
    int total = 0;
    for (int r = 0; r < size; r++) total += counts[r] = cnt(r, scale) + 1;
    int *in = xmalloc(sizeof(int) * (size_t)total), *out = xmalloc(sizeof(int) * (size_t)total);
    for (int in_place = 0; in_place < 2; in_place++) {
        int *buf = in_place ? out : in;
        for (int i = 0; i < total; i++) buf[i] = rank * 3 + i % 11;
        OK(MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : in, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        int start = 0;
        for (int r = 0; r < rank; r++) start += counts[r];
        for (int i = 0; i < counts[rank]; i++) {
            int want = 3 * size * (size - 1) / 2 + size * ((start + i) % 11);
            CHECK(out[i] == want, "reduce_scatter (in place %d) [%d] = %d, want %d", in_place, i, out[i], want);
        }
        int block = scale + 2;
        int *b = xmalloc(sizeof(int) * (size_t)(block * size));
        for (int i = 0; i < block * size; i++) b[i] = rank + i;
        OK(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : b, in_place ? b : out, block, MPI_INT, MPI_MAX,
                                    MPI_COMM_WORLD));
        int *res = in_place ? b : out;
        for (int i = 0; i < block; i++)
            CHECK(res[i] == size - 1 + rank * block + i, "reduce_scatter_block [%d] = %d", i, res[i]);
        free(b);
    }
    free(counts);
    free(in);
    free(out);
}

static void test_scan(int scale, MPI_Op comp) {
    int n = scale + 1;
    long *in = xmalloc(sizeof(long) * (size_t)n), *out = xmalloc(sizeof(long) * (size_t)n);
    for (int in_place = 0; in_place < 2; in_place++) {
        long *buf = in_place ? out : in;
        for (int i = 0; i < n; i++) buf[i] = rank + 1 + i;
        OK(MPI_Scan(in_place ? MPI_IN_PLACE : in, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            long want = (long)(rank + 1) * (rank + 2) / 2 + (long)(rank + 1) * i;
            CHECK(out[i] == want, "scan (in place %d) [%d] = %ld, want %ld", in_place, i, out[i], want);
        }
        for (int i = 0; i < n; i++) buf[i] = rank + 1 + i;
        if (!in_place)
            for (int i = 0; i < n; i++) out[i] = -5;
        OK(MPI_Exscan(in_place ? MPI_IN_PLACE : in, out, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        if (rank > 0)
            for (int i = 0; i < n; i++) {
                long want = (long)rank * (rank + 1) / 2 + (long)rank * i;
                CHECK(out[i] == want, "exscan (in place %d) [%d] = %ld, want %ld", in_place, i, out[i], want);
            }
    }
    affine *m = xmalloc(sizeof(affine) * (size_t)n), *r = xmalloc(sizeof(affine) * (size_t)n);
    for (int i = 0; i < n; i++) m[i] = map_of(rank, i);
    OK(MPI_Scan(m, r, n, MPI_2INT, comp, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) {
        affine want = composed(rank + 1, i);
        CHECK(r[i].a == want.a && r[i].b == want.b, "non-commutative scan [%d] = (%d, %d), want (%d, %d)", i, r[i].a,
              r[i].b, want.a, want.b);
    }
    OK(MPI_Exscan(m, r, n, MPI_2INT, comp, MPI_COMM_WORLD));
    if (rank > 0)
        for (int i = 0; i < n; i++) {
            affine want = composed(rank, i);
            CHECK(r[i].a == want.a && r[i].b == want.b, "non-commutative exscan [%d]", i);
        }
    free(in);
    free(out);
    free(m);
    free(r);
}


/* Rank r's value for element i: ties between ranks on purpose (the least index must win). */
static int loc_val(int r, int i) { return ((r * 5 + i * 3) % 7) - 3; }

struct dint { double v; int i; };
struct fint { float v; int i; };
struct lint { long v; int i; };
struct sint { short v; int i; };
struct iint { int v; int i; };

/* The expected MINLOC (min = 1) or MAXLOC over ranks 0..upto-1 of element i. */
static void loc_want(int min, int upto, int i, int *v, int *idx) {
    *v = loc_val(0, i);
    *idx = 0;
    for (int r = 1; r < upto; r++) {
        int x = loc_val(r, i);
        if (min ? x < *v : x > *v) {
            *v = x;
            *idx = r;
        }
    }
}

#define LOC_CASE(T, DT, CHECKV)                                                                           \
    do {                                                                                                  \
        T *in = xmalloc(sizeof(T) * (size_t)n), *out = xmalloc(sizeof(T) * (size_t)n);                 \
        for (int min = 0; min < 2; min++) {                                                               \
            MPI_Op op = min ? MPI_MINLOC : MPI_MAXLOC;                                                    \
            for (int i = 0; i < n; i++) {                                                                 \
                in[i].v = loc_val(rank, i);                                                               \
                in[i].i = rank;                                                                           \
            }                                                                                             \
            OK(MPI_Allreduce(in, out, n, DT, op, MPI_COMM_WORLD));                                        \
            for (int i = 0; i < n; i++) {                                                                 \
                int wv, wi;                                                                               \
                loc_want(min, size, i, &wv, &wi);                                                         \
                CHECK(CHECKV(out[i].v) == wv && out[i].i == wi, #DT " allreduce %s [%d] = (%d, %d), want (%d, %d)", \
                      min ? "minloc" : "maxloc", i, (int)CHECKV(out[i].v), out[i].i, wv, wi);             \
            }                                                                                             \
            int root = (size - 1) / 2;                                                                    \
            for (int i = 0; i < n; i++) out[i].i = -1;                                                    \
            OK(MPI_Reduce(in, out, n, DT, op, root, MPI_COMM_WORLD));                                     \
            if (rank == root)                                                                             \
                for (int i = 0; i < n; i++) {                                                             \
                    int wv, wi;                                                                           \
                    loc_want(min, size, i, &wv, &wi);                                                     \
                    CHECK(CHECKV(out[i].v) == wv && out[i].i == wi, #DT " reduce [%d]", i);               \
                }                                                                                         \
            OK(MPI_Scan(in, out, n, DT, op, MPI_COMM_WORLD));                                             \
            for (int i = 0; i < n; i++) {                                                                 \
                int wv, wi;                                                                               \
                loc_want(min, rank + 1, i, &wv, &wi);                                                     \
                CHECK(CHECKV(out[i].v) == wv && out[i].i == wi, #DT " scan [%d]", i);                     \
            }                                                                                             \
        }                                                                                                 \
        free(in);                                                                                         \
        free(out);                                                                                        \
    } while (0)

#define AS_INT(x) ((int)(x))

static void test_loc_and_derived(int scale) {
    int n = scale + 2;
    LOC_CASE(struct dint, MPI_DOUBLE_INT, AS_INT);
    LOC_CASE(struct fint, MPI_FLOAT_INT, AS_INT);
    LOC_CASE(struct lint, MPI_LONG_INT, AS_INT);
    LOC_CASE(struct sint, MPI_SHORT_INT, AS_INT);
    LOC_CASE(struct iint, MPI_2INT, AS_INT);
    /* Reduce_local on a padded pair. */
    struct dint a = {2.0, 7}, b = {2.0, 3};
    OK(MPI_Reduce_local(&a, &b, 1, MPI_DOUBLE_INT, MPI_MAXLOC));
    CHECK(b.v == 2.0 && b.i == 3, "reduce_local maxloc = (%f, %d)", b.v, b.i);
    a.v = 5.0;
    OK(MPI_Reduce_local(&a, &b, 1, MPI_DOUBLE_INT, MPI_MAXLOC));
    CHECK(b.v == 5.0 && b.i == 7, "reduce_local maxloc = (%f, %d)", b.v, b.i);

    /* A contiguous type of 3 doubles (dense) and a strided one (every other double). */
    MPI_Datatype three, every_other;
    OK(MPI_Type_contiguous(3, MPI_DOUBLE, &three));
    OK(MPI_Type_commit(&three));
    OK(MPI_Type_vector(1, 1, 2, MPI_DOUBLE, &every_other));
    OK(MPI_Type_create_resized(every_other, 0, 2 * (MPI_Aint)sizeof(double), &every_other));
    OK(MPI_Type_commit(&every_other));
    double *x = xmalloc(sizeof(double) * 6 * (size_t)n), *y = xmalloc(sizeof(double) * 6 * (size_t)n);
    for (int i = 0; i < 3 * n; i++) x[i] = rank + i;
    OK(MPI_Allreduce(x, y, n, three, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < 3 * n; i++)
        CHECK(y[i] == (double)size * (size - 1) / 2 + (double)size * i, "contiguous-type allreduce [%d] = %f", i, y[i]);
    for (int i = 0; i < 2 * n; i++) {
        x[i] = i % 2 ? -1.0 : rank * 2.0 + i;
        y[i] = -3.0;
    }
    OK(MPI_Allreduce(x, y, n, every_other, MPI_MAX, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) {
        CHECK(y[2 * i] == (size - 1) * 2.0 + 2 * i, "strided allreduce [%d] = %f", i, y[2 * i]);
        CHECK(y[2 * i + 1] == -3.0, "strided allreduce wrote a hole at %d", 2 * i + 1);
    }
    OK(MPI_Reduce(rank == 0 ? MPI_IN_PLACE : x, rank == 0 ? x : NULL, n, every_other, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int i = 0; i < n; i++) {
            CHECK(x[2 * i] == (double)size * (size - 1) + 2.0 * size * i, "strided reduce in place [%d] = %f", i,
                  x[2 * i]);
            CHECK(x[2 * i + 1] == -1.0, "strided reduce in place wrote a hole");
        }
    free(x);
    free(y);
    OK(MPI_Type_free(&three));
    OK(MPI_Type_free(&every_other));
}


/* `w` holds 2n ints: element i of the strided type is w[2i]. */
static void fill_wide(int *w, int n, int (*f)(int, int), int a) {
    for (int i = 0; i < n; i++) {
        w[2 * i] = f(a, i);
        w[2 * i + 1] = POISON;
    }
}
static int fv(int a, int i) { return a * 1000 + i % 991; }
static void check_wide(const int *w, int n, int (*f)(int, int), int a, const char *what) {
    for (int i = 0; i < n; i++) {
        CHECK(w[2 * i] == f(a, i), "%s [%d] = %d, want %d", what, i, w[2 * i], f(a, i));
        CHECK(w[2 * i + 1] == POISON, "%s wrote a hole at %d", what, 2 * i + 1);
    }
}

static void test_typed_regular(int scale, MPI_Datatype strided) {
    int n = scale + 1;
    int *w = xmalloc(sizeof(int) * 2 * (size_t)n * (size_t)size), *p = xmalloc(sizeof(int) * (size_t)n * (size_t)size);
    int *w2 = xmalloc(sizeof(int) * 2 * (size_t)n * (size_t)size);
    /* Ranks of one parity use the strided type, the others plain ints. */
    int mine_strided = rank % 2 == 0;
    for (int root = 0; root < size; root += size > 2 ? size - 1 : 1) {
        /* Bcast. */
        if (mine_strided) {
            if (rank == root) fill_wide(w, n, fv, root);
            else for (int i = 0; i < 2 * n; i++) w[i] = POISON;
            OK(MPI_Bcast(w, n, strided, root, MPI_COMM_WORLD));
            check_wide(w, n, fv, root, "strided bcast");
        } else {
            for (int i = 0; i < n; i++) p[i] = rank == root ? fv(root, i) : POISON;
            OK(MPI_Bcast(p, n, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i < n; i++) CHECK(p[i] == fv(root, i), "bcast beside a strided one [%d]", i);
        }
        /* Gather: senders of either kind, the root receives strided (or ints), in place too. */
        for (int in_place = 0; in_place < 2; in_place++) {
            if (mine_strided) fill_wide(w2, n, fv, rank);
            else for (int i = 0; i < n; i++) p[i] = fv(rank, i);
            if (rank == root) {
                for (int i = 0; i < 2 * n * size; i++) w[i] = POISON;
                if (in_place) fill_wide(w + 2 * n * root, n, fv, root);
                const void *sb = in_place ? MPI_IN_PLACE : mine_strided ? (void *)w2 : (void *)p;
                OK(MPI_Gather(sb, n, mine_strided ? strided : MPI_INT, w, n, strided, root, MPI_COMM_WORLD));
                for (int r = 0; r < size; r++) check_wide(w + 2 * n * r, n, fv, r, "gather into strided");
            } else {
                OK(MPI_Gather(mine_strided ? (void *)w2 : (void *)p, n, mine_strided ? strided : MPI_INT, NULL, 0,
                              MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
            }
        }
        /* Scatter: the root sends strided; receivers of either kind. */
        if (rank == root)
            for (int r = 0; r < size; r++) fill_wide(w + 2 * n * r, n, fv, r + 7);
        for (int i = 0; i < 2 * n; i++) w2[i] = POISON;
        for (int i = 0; i < n; i++) p[i] = POISON;
        OK(MPI_Scatter(w, n, strided, mine_strided ? (void *)w2 : (void *)p, n, mine_strided ? strided : MPI_INT, root,
                       MPI_COMM_WORLD));
        if (mine_strided) check_wide(w2, n, fv, rank + 7, "scatter into strided");
        else for (int i = 0; i < n; i++) CHECK(p[i] == fv(rank + 7, i), "scatter into ints [%d]", i);
    }
    /* Allgather and alltoall with mixed types, in place too. */
    for (int in_place = 0; in_place < 2; in_place++) {
        if (mine_strided) {
            for (int i = 0; i < 2 * n * size; i++) w[i] = POISON;
            fill_wide(w2, n, fv, rank);
            if (in_place) fill_wide(w + 2 * n * rank, n, fv, rank);
            OK(MPI_Allgather(in_place ? MPI_IN_PLACE : w2, n, strided, w, n, strided, MPI_COMM_WORLD));
            for (int r = 0; r < size; r++) check_wide(w + 2 * n * r, n, fv, r, "allgather strided");
        } else {
            for (int i = 0; i < n * size; i++) p[i] = POISON;
            for (int i = 0; i < n; i++) (in_place ? p + n * rank : w2)[i] = fv(rank, i);
            OK(MPI_Allgather(in_place ? MPI_IN_PLACE : w2, n, MPI_INT, p, n, MPI_INT, MPI_COMM_WORLD));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++) CHECK(p[n * r + i] == fv(r, i), "allgather ints beside strided");
        }
        if (mine_strided) {
            for (int to = 0; to < size; to++) fill_wide((in_place ? w : w2) + 2 * n * to, n, fv, rank * 10 + to);
            if (!in_place) for (int i = 0; i < 2 * n * size; i++) w[i] = POISON;
            OK(MPI_Alltoall(in_place ? MPI_IN_PLACE : w2, n, strided, w, n, strided, MPI_COMM_WORLD));
            for (int from = 0; from < size; from++) check_wide(w + 2 * n * from, n, fv, from * 10 + rank, "alltoall strided");
        } else {
            int *src = in_place ? p : w2;
            for (int to = 0; to < size; to++)
                for (int i = 0; i < n; i++) src[n * to + i] = fv(rank * 10 + to, i);
            OK(MPI_Alltoall(in_place ? MPI_IN_PLACE : w2, n, MPI_INT, p, n, MPI_INT, MPI_COMM_WORLD));
            for (int from = 0; from < size; from++)
                for (int i = 0; i < n; i++) CHECK(p[n * from + i] == fv(from * 10 + rank, i), "alltoall ints beside strided");
        }
    }
    /* A struct type (several basic types: no leaf) in a broadcast. */
    struct item { int k; double x; } *items = xmalloc(sizeof(struct item) * (size_t)n);
    MPI_Datatype st;
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {offsetof(struct item, k), offsetof(struct item, x)};
    MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE};
    OK(MPI_Type_create_struct(2, bl, disp, ty, &st));
    OK(MPI_Type_commit(&st));
    for (int i = 0; i < n; i++) {
        items[i].k = rank == 0 ? i : -1;
        items[i].x = rank == 0 ? i * 0.5 : -1.0;
    }
    OK(MPI_Bcast(items, n, st, 0, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(items[i].k == i && items[i].x == i * 0.5, "struct bcast [%d]", i);
    OK(MPI_Type_free(&st));
    free(items);
    free(w);
    free(w2);
    free(p);
}


/* A user's operation on a non-contiguous type gets the data in the type's layout: every other int. */
static void strided_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[2 * i] += a[2 * i];
}

static void test_user_op_strided(int scale, MPI_Datatype strided) {
    int n = scale + 1;
    MPI_Op op;
    OK(MPI_Op_create(strided_sum, 1, &op));
    int *x = xmalloc(sizeof(int) * 2 * (size_t)n), *y = xmalloc(sizeof(int) * 2 * (size_t)n);
    for (int i = 0; i < n; i++) {
        x[2 * i] = rank + i;
        x[2 * i + 1] = POISON;
        y[2 * i] = y[2 * i + 1] = -1;
    }
    OK(MPI_Allreduce(x, y, n, strided, op, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) {
        CHECK(y[2 * i] == size * (size - 1) / 2 + size * i, "user op on a strided type [%d] = %d", i, y[2 * i]);
        CHECK(y[2 * i + 1] == -1, "user op on a strided type wrote a hole");
    }
    for (int i = 0; i < n; i++) y[2 * i] = -1;
    OK(MPI_Scan(x, y, n, strided, op, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++)
        CHECK(y[2 * i] == rank * (rank + 1) / 2 + (rank + 1) * i, "user op scan on a strided type [%d]", i);
    MPI_Request r;
    for (int i = 0; i < n; i++) y[2 * i] = -1;
    OK(MPI_Iallreduce(x, y, n, strided, op, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) CHECK(y[2 * i] == size * (size - 1) / 2 + size * i, "user op iallreduce [%d]", i);
    OK(MPI_Op_free(&op));
    free(x);
    free(y);
}

static void test_errors(void) {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int x = 1, y;
    FAILS_WITH(MPI_Scan(&x, &y, 1, MPI_INT, MPI_MINLOC + 1000, MPI_COMM_WORLD), MPI_ERR_OP);
    FAILS_WITH(MPI_Exscan(&x, &y, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Gatherv(&x, 1, MPI_INT, &y, NULL, NULL, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Allgatherv(&x, 1, MPI_INT, &y, NULL, NULL, MPI_INT, MPI_COMM_WORLD), MPI_ERR_ARG);
    FAILS_WITH(MPI_Reduce_scatter_block(&x, &y, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MINLOC, MPI_COMM_WORLD), MPI_ERR_OP);
    FAILS_WITH(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    MPI_Datatype strided;
    OK(MPI_Type_vector(1, 1, 2, MPI_INT, &strided));
    OK(MPI_Type_create_resized(strided, 0, 2 * (MPI_Aint)sizeof(int), &strided));
    OK(MPI_Type_commit(&strided));
    MPI_Op comp;
    OK(MPI_Op_create(compose, 0, &comp));
    int scales[] = {1, 3000};
    for (int s = 0; s < 2; s++) {
        test_gatherv_scatterv(scales[s], strided);
        test_allgatherv(scales[s], strided);
        test_alltoallv(scales[s]);
        test_alltoallw(scales[s], strided);
        test_reduce_scatter(scales[s]);
        test_scan(scales[s], comp);
        test_loc_and_derived(scales[s]);
        test_typed_regular(scales[s], strided);
        test_user_op_strided(scales[s], strided);
    }
    test_errors();
    OK(MPI_Op_free(&comp));
    OK(MPI_Type_free(&strided));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK vcoll %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
