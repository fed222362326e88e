/* MPI_Type_create_darray: block, cyclic(k) and none distributions, default and explicit
 * arguments, C and Fortran order, 1 to 3 dimensions. Every rank checks, for process grids of 1 to
 * 6 processes and every process in them, that the type selects exactly the elements a brute-force
 * ownership test finds, in the array's order (packing an array of indices), with extent the whole
 * array; then the job assembles a global array on rank 0 by receiving each rank's part with that
 * rank's darray type. Envelope and contents; a rank outside the grid gives MPI_ERR_RANK, other bad
 * arguments MPI_ERR_ARG (only those MPICH 4.0.2 does not crash on). Passes under MPICH as well. */
#include "check.h"

struct dist {
    int ndims;
    int gsizes[3];
    int distribs[3];
    int dargs[3];
    int order;
};

/* Does process coordinate p of np own index i of dimension d? */
static int owns(const struct dist *s, int d, int np, int p, int i) {
    int g = s->gsizes[d], a = s->dargs[d];
    switch (s->distribs[d]) {
    case MPI_DISTRIBUTE_NONE: return 1;
    case MPI_DISTRIBUTE_BLOCK: {
        int b = a == MPI_DISTRIBUTE_DFLT_DARG ? (g + np - 1) / np : a;
        return i / b == p;
    }
    default: {
        int b = a == MPI_DISTRIBUTE_DFLT_DARG ? 1 : a;
        return (i / b) % np == p;
    }
    }
}

/* The linear indices (in memory) rank owns, in the array's order; returns how many. */
static int expected(const struct dist *s, const int *psizes, int rank, int *out) {
    int coords[3], r = rank, n = 0, total = 1;
    for (int d = s->ndims - 1; d >= 0; d--) coords[d] = r % psizes[d], r /= psizes[d];
    for (int d = 0; d < s->ndims; d++) total *= s->gsizes[d];
    /* Walk memory order: linear index k; its coordinates by the storage order. */
    for (int k = 0; k < total; k++) {
        int idx[3], rest = k, mine = 1;
        if (s->order == MPI_ORDER_C) {
            for (int d = s->ndims - 1; d >= 0; d--) idx[d] = rest % s->gsizes[d], rest /= s->gsizes[d];
        } else {
            for (int d = 0; d < s->ndims; d++) idx[d] = rest % s->gsizes[d], rest /= s->gsizes[d];
        }
        for (int d = 0; d < s->ndims; d++) mine &= owns(s, d, psizes[d], coords[d], idx[d]);
        if (mine) out[n++] = k;
    }
    return n;
}

static MPI_Datatype make(const struct dist *s, int size, int rank, const int *psizes) {
    MPI_Datatype t;
    OK(MPI_Type_create_darray(size, rank, s->ndims, s->gsizes, s->distribs, s->dargs, psizes, s->order, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    return t;
}

static void check_layout(const struct dist *s, int size, int rank, const int *psizes) {
    int total = 1;
    for (int d = 0; d < s->ndims; d++) total *= s->gsizes[d];
    int *global = xmalloc(sizeof(int) * total), *want = xmalloc(sizeof(int) * total),
        *packed = xmalloc(sizeof(int) * total);
    for (int k = 0; k < total; k++) global[k] = k;
    int n = expected(s, psizes, rank, want);
    MPI_Datatype t = make(s, size, rank, psizes);
    int sz;
    MPI_Aint lb, ext;
    OK(MPI_Type_size(t, &sz));
    OK(MPI_Type_get_extent(t, &lb, &ext));
    CHECK(sz == n * (int)sizeof(int), "%dD darray, process %d of %d: size %d, expected %d elements", s->ndims, rank,
          size, sz, n);
    CHECK(lb == 0 && ext == (MPI_Aint)(total * sizeof(int)), "darray extent %ld lb %ld", (long)ext, (long)lb);
    int pos = 0;
    OK(MPI_Pack(global, 1, t, packed, total * (int)sizeof(int), &pos, MPI_COMM_SELF));
    CHECK(pos == sz, "packed %d bytes", pos);
    for (int k = 0; k < n; k++)
        CHECK(packed[k] == want[k], "%dD darray (order %d), process %d of %d: element %d is index %d, not %d",
              s->ndims, s->order, rank, size, k, packed[k], want[k]);
    OK(MPI_Type_free(&t));
    free(global);
    free(want);
    free(packed);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;
    const int B = MPI_DISTRIBUTE_BLOCK, C = MPI_DISTRIBUTE_CYCLIC, N = MPI_DISTRIBUTE_NONE,
              D = MPI_DISTRIBUTE_DFLT_DARG;
    struct dist shapes[] = {
        {1, {10}, {B}, {D}, MPI_ORDER_C},
        {1, {11}, {C}, {3}, MPI_ORDER_FORTRAN},
        {2, {8, 6}, {B, B}, {D, D}, MPI_ORDER_C},
        {2, {7, 5}, {C, B}, {2, D}, MPI_ORDER_FORTRAN},
        {2, {6, 9}, {C, C}, {D, 2}, MPI_ORDER_C},
        {3, {4, 5, 3}, {C, N, B}, {1, D, D}, MPI_ORDER_C},
        {3, {5, 3, 4}, {B, C, N}, {D, 2, D}, MPI_ORDER_FORTRAN},
    };
    int nshapes = (int)(sizeof shapes / sizeof *shapes);

    /* Every process of grids of 1..6 processes, locally. */
    for (int si = 0; si < nshapes; si++) {
        struct dist *s = &shapes[si];
        for (int np = 1; np <= 6; np++) {
            int psizes[3] = {0, 0, 0};
            for (int d = 0; d < s->ndims; d++)
                if (s->distribs[d] == N) psizes[d] = 1;
            OK(MPI_Dims_create(np, s->ndims, psizes));
            /* A block too small to cover its dimension is erroneous: skip such grids. */
            int fits = 1;
            for (int d = 0; d < s->ndims; d++)
                if (s->distribs[d] == B && s->dargs[d] != D && s->dargs[d] * psizes[d] < s->gsizes[d]) fits = 0;
            if (!fits) continue;
            for (int r = 0; r < np; r++) check_layout(s, np, r, psizes);
        }
    }

    /* Assemble a 2-D block-cyclic array on rank 0 from every rank's part. */
    struct dist g = {2, {9, 7}, {C, B}, {2, D}, MPI_ORDER_C};
    int psizes[2] = {0, 0};
    OK(MPI_Dims_create(size, 2, psizes));
    int total = 63, *mine = xmalloc(sizeof(int) * total), *all = xmalloc(sizeof(int) * total);
    for (int k = 0; k < total; k++) mine[k] = 1000 * rank + k, all[k] = -1;
    MPI_Datatype t = make(&g, size, rank, psizes);
    MPI_Request req;
    OK(MPI_Isend(mine, 1, t, 0, 9, MPI_COMM_WORLD, &req));
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            MPI_Datatype tr = make(&g, size, r, psizes);
            OK(MPI_Recv(all, 1, tr, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            OK(MPI_Type_free(&tr));
        }
        int *own = xmalloc(sizeof(int) * total);
        for (int r = 0; r < size; r++) {
            int n = expected(&g, psizes, r, own);
            for (int k = 0; k < n; k++)
                CHECK(all[own[k]] == 1000 * r + own[k], "assembled element %d is %d", own[k], all[own[k]]);
        }
        for (int k = 0; k < total; k++) CHECK(all[k] >= 0, "element %d owned by no rank", k);
        free(own);
    }
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));

    /* Envelope and contents. */
    int ni, na, nd, comb;
    OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_DARRAY && ni == 4 * 2 + 4 && na == 0 && nd == 1, "envelope %d %d %d %d", ni, na, nd,
          comb);
    int ints[12];
    MPI_Aint aints[1];
    MPI_Datatype types[1];
    OK(MPI_Type_get_contents(t, 12, 0, 1, ints, aints, types));
    int want[12] = {size, rank, 2, 9, 7, C, B, 2, D, psizes[0], psizes[1], MPI_ORDER_C};
    for (int k = 0; k < 12; k++) CHECK(ints[k] == want[k], "contents integer %d is %d, not %d", k, ints[k], want[k]);
    CHECK(types[0] == MPI_INT, "contents type");
    OK(MPI_Type_free(&t));

    /* Bad arguments. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype bad;
    int gs[2] = {10, 10}, ds[2] = {B, B}, da[2] = {D, D}, ps[2] = {2, 2}, small[2] = {2, D};
    int neg[2] = {-1, D};
    FAILS_WITH(MPI_Type_create_darray(4, 4, 2, gs, ds, da, ps, MPI_ORDER_C, MPI_INT, &bad), MPI_ERR_RANK);
    FAILS_WITH(MPI_Type_create_darray(4, 0, 2, gs, ds, small, ps, MPI_ORDER_C, MPI_INT, &bad), MPI_ERR_ARG);
    FAILS_WITH(MPI_Type_create_darray(4, 0, 2, gs, ds, da, ps, 12345, MPI_INT, &bad), MPI_ERR_ARG);
    FAILS_WITH(MPI_Type_create_darray(4, 0, 2, gs, ds, neg, ps, MPI_ORDER_C, MPI_INT, &bad), MPI_ERR_ARG);
    free(mine);
    free(all);
    printf("OK type_darray %d\n", rank);
    MPI_Finalize();
    return 0;
}
