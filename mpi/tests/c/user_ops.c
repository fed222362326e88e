/* User reduction operations (MPI_Op_create/MPI_Op_free/MPI_Op_commutative) in every reduction:
 * MPI_Reduce at every root, MPI_Allreduce (in place too), MPI_Reduce_local. A non-commutative
 * operation (composition of affine maps x -> a x + b on MPI_2INT, wrapping arithmetic) must
 * combine in rank order; a commutative one (a sum of doubles by the user's function) must match
 * MPI_SUM. Counts 1, 7, 1000 and 5000 (past the eager limit: segmented algorithms). Run with
 * forced algorithms too (NEMESIS_COLL_ALG). Prints "OK user_ops <rank>". */
#include "affine.h"

static int rank, size;

static void dsum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    CHECK(*dt == MPI_DOUBLE, "dsum called on type %#x", *dt);
    double *x = in, *y = inout;
    for (int i = 0; i < *len; i++) y[i] += x[i];
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;

    MPI_Op comp, sum;
    OK(MPI_Op_create(compose, 0, &comp));
    OK(MPI_Op_create(dsum, 1, &sum));
    int commute = -1;
    OK(MPI_Op_commutative(comp, &commute));
    CHECK(commute == 0, "compose is commutative?");
    OK(MPI_Op_commutative(sum, &commute));
    CHECK(commute == 1, "dsum is not commutative?");
    OK(MPI_Op_commutative(MPI_MAX, &commute));
    CHECK(commute == 1, "MPI_MAX is not commutative?");
    /* Every predefined operation answers (mpi4py asks them all): the pair ones are commutative,
       the one-sided MPI_REPLACE and MPI_NO_OP are not. */
    OK(MPI_Op_commutative(MPI_MAXLOC, &commute));
    CHECK(commute == 1, "MPI_MAXLOC is not commutative?");
    OK(MPI_Op_commutative(MPI_MINLOC, &commute));
    CHECK(commute == 1, "MPI_MINLOC is not commutative?");
    OK(MPI_Op_commutative(MPI_REPLACE, &commute));
    CHECK(commute == 0, "MPI_REPLACE is commutative?");
    OK(MPI_Op_commutative(MPI_NO_OP, &commute));
    CHECK(commute == 0, "MPI_NO_OP is commutative?");

    const int counts[] = {1, 7, 1000, 5000};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        int n = counts[k];
        affine *in = xmalloc(sizeof(affine) * n), *out = xmalloc(sizeof(affine) * n);
        double *d = xmalloc(sizeof(double) * n), *dr = xmalloc(sizeof(double) * n),
               *ds = xmalloc(sizeof(double) * n);
        for (int i = 0; i < n; i++) {
            in[i] = map_of(rank, i);
            d[i] = rank * 0.5 + i;
        }
        for (int root = 0; root < size; root++) {
            memset(out, 0, sizeof(affine) * n);
            OK(MPI_Reduce(in, out, n, MPI_2INT, comp, root, MPI_COMM_WORLD));
            if (rank == root)
                for (int i = 0; i < n; i++) {
                    affine e = composed(size, i);
                    CHECK(out[i].a == e.a && out[i].b == e.b, "reduce n=%d root=%d [%d]: (%d,%d) not (%d,%d)", n,
                          root, i, out[i].a, out[i].b, e.a, e.b);
                }
        }
        memset(out, 0, sizeof(affine) * n);
        OK(MPI_Allreduce(in, out, n, MPI_2INT, comp, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            affine e = composed(size, i);
            CHECK(out[i].a == e.a && out[i].b == e.b, "allreduce n=%d [%d]", n, i);
        }
        memcpy(out, in, sizeof(affine) * n);
        OK(MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_2INT, comp, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            affine e = composed(size, i);
            CHECK(out[i].a == e.a && out[i].b == e.b, "allreduce in place n=%d [%d]", n, i);
        }
        OK(MPI_Allreduce(d, dr, n, MPI_DOUBLE, sum, MPI_COMM_WORLD));
        OK(MPI_Allreduce(d, ds, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(dr[i] == ds[i], "user sum n=%d [%d]: %g vs %g", n, i, dr[i], ds[i]);
        free(in);
        free(out);
        free(d);
        free(dr);
        free(ds);
    }

    /* MPI_Reduce_local: inout = in ∘ inout. */
    affine x[2] = {{3, 1}, {5, 2}}, y[2] = {{2, 7}, {1, 1}};
    OK(MPI_Reduce_local(x, y, 2, MPI_2INT, comp));
    CHECK(y[0].a == 6 && y[0].b == 9 && y[1].a == 5 && y[1].b == 3, "reduce_local: (%d,%d) (%d,%d)", y[0].a, y[0].b,
          y[1].a, y[1].b);
    int li[3] = {1, 2, 3}, lo[3] = {10, 20, 30};
    OK(MPI_Reduce_local(li, lo, 3, MPI_INT, MPI_SUM));
    CHECK(lo[0] == 11 && lo[2] == 33, "reduce_local with MPI_SUM");
    if (size > 1) CHECK(affine_calls > 0, "the user function was never called");

    OK(MPI_Op_free(&comp));
    CHECK(comp == MPI_OP_NULL, "freed op is not MPI_OP_NULL");
    OK(MPI_Op_free(&sum));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Op max = MPI_MAX;
    FAILS_WITH(MPI_Op_free(&max), MPI_ERR_OP);
    int z = 0, zz;
    FAILS_WITH(MPI_Allreduce(&z, &zz, 1, MPI_INT, comp, MPI_COMM_WORLD), MPI_ERR_OP);

    OK(MPI_Finalize());
    printf("OK user_ops %d\n", rank);
    return 0;
}
