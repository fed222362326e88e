/* The large-count (_c) datatype calls: every _c constructor gives the layout of its int form (size,
 * extent, true extent, the data a message moves), reports its arguments as large counts through
 * Type_get_envelope_c/contents_c; types of more than 2^31 bytes (Type_size_c, Pack_size_c; the
 * int Type_size says MPI_UNDEFINED); Pack_c/Unpack_c round trips and positions; Get_count_c and
 * Get_elements_c; Reduce_local_c; Op_create_c (an MPI_User_function_c that calls MPI). Ranks
 * exchange _c-typed data in a ring. Passes under MPICH as well. */
#include "check.h"

static int rank, size;

/* An MPI_User_function_c: a sum of ints that also asks MPI the element size (callbacks may call
 * MPI). */
static void sum_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
    int sz = 0;
    MPI_Type_size(*dt, &sz);
    CHECK(sz == (int)sizeof(int), "the operation's datatype has size %d", sz);
    for (MPI_Count k = 0; k < *len; k++) ((int *)inout)[k] += ((int *)in)[k];
}

/* Same size, bounds and true bounds. */
static void same_layout(MPI_Datatype a, MPI_Datatype b, const char *what) {
    MPI_Count sa, sb, la, lb, ea, eb, tla, tlb, tea, teb;
    OK(MPI_Type_size_c(a, &sa));
    OK(MPI_Type_size_c(b, &sb));
    OK(MPI_Type_get_extent_c(a, &la, &ea));
    OK(MPI_Type_get_extent_c(b, &lb, &eb));
    OK(MPI_Type_get_true_extent_c(a, &tla, &tea));
    OK(MPI_Type_get_true_extent_c(b, &tlb, &teb));
    CHECK(sa == sb && la == lb && ea == eb && tla == tlb && tea == teb,
          "%s: size %lld/%lld lb %lld/%lld extent %lld/%lld true %lld+%lld / %lld+%lld", what, (long long)sa,
          (long long)sb, (long long)la, (long long)lb, (long long)ea, (long long)eb, (long long)tla, (long long)tea,
          (long long)tlb, (long long)teb);
}

/* The _c envelope is (0 ints unless fixed, 0 addresses, nc large counts, nd types, combiner) and
 * the large counts are `counts`. */
static void large_contents(MPI_Datatype t, int ni, int nc, const MPI_Count *counts, int nd, int combiner,
                           const char *what) {
    MPI_Count gi, ga, gc, gd;
    int comb;
    OK(MPI_Type_get_envelope_c(t, &gi, &ga, &gc, &gd, &comb));
    CHECK(gi == ni && ga == 0 && gc == nc && gd == nd && comb == combiner, "%s: envelope_c %lld %lld %lld %lld %d",
          what, (long long)gi, (long long)ga, (long long)gc, (long long)gd, comb);
    int ints[16];
    MPI_Aint aints[1];
    MPI_Count got[16];
    MPI_Datatype types[4];
    OK(MPI_Type_get_contents_c(t, 16, 0, 16, 4, ints, aints, got, types));
    for (int k = 0; k < nc; k++)
        CHECK(got[k] == counts[k], "%s: large count %d is %lld, not %lld", what, k, (long long)got[k],
              (long long)counts[k]);
    for (int k = 0; k < nd; k++) {
        MPI_Count a, b, c, d;
        int cm;
        OK(MPI_Type_get_envelope_c(types[k], &a, &b, &c, &d, &cm));
        if (cm != MPI_COMBINER_NAMED) OK(MPI_Type_free(&types[k]));
    }
}

/* Both types move the same ints: sends with one, receives with the other, around the ring. */
static void same_data(MPI_Datatype a, MPI_Datatype b, const char *what) {
    int src[64], dst[64], ref[64];
    for (int k = 0; k < 64; k++) src[k] = rank * 100 + k, dst[k] = ref[k] = -1;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Status st;
    OK(MPI_Sendrecv(src, 1, a, next, 3, dst, 1, b, prev, 3, MPI_COMM_WORLD, &st));
    OK(MPI_Sendrecv(src, 1, b, next, 4, ref, 1, b, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int k = 0; k < 64; k++) CHECK(dst[k] == ref[k], "%s: int %d is %d, not %d", what, k, dst[k], ref[k]);
    MPI_Count n = -1;
    OK(MPI_Get_count_c(&st, a, &n));
    CHECK(n == 1, "%s: Get_count_c %lld", what, (long long)n);
}

static void check_pair(MPI_Datatype c, MPI_Datatype i, int ni, int nc, const MPI_Count *counts, int nd, int comb,
                       const char *what) {
    OK(MPI_Type_commit(&c));
    OK(MPI_Type_commit(&i));
    same_layout(c, i, what);
    large_contents(c, ni, nc, counts, nd, comb, what);
    same_data(c, i, what);
    OK(MPI_Type_free(&c));
    OK(MPI_Type_free(&i));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;
    MPI_Datatype c, i;

    OK(MPI_Type_contiguous_c(5, MPI_INT, &c));
    OK(MPI_Type_contiguous(5, MPI_INT, &i));
    MPI_Count k1[] = {5};
    check_pair(c, i, 0, 1, k1, 1, MPI_COMBINER_CONTIGUOUS, "contiguous");

    OK(MPI_Type_vector_c(3, 2, 5, MPI_INT, &c));
    OK(MPI_Type_vector(3, 2, 5, MPI_INT, &i));
    MPI_Count k2[] = {3, 2, 5};
    check_pair(c, i, 0, 3, k2, 1, MPI_COMBINER_VECTOR, "vector");

    OK(MPI_Type_create_hvector_c(3, 2, 24, MPI_INT, &c));
    OK(MPI_Type_create_hvector(3, 2, 24, MPI_INT, &i));
    MPI_Count k3[] = {3, 2, 24};
    check_pair(c, i, 0, 3, k3, 1, MPI_COMBINER_HVECTOR, "hvector");

    MPI_Count bl[3] = {2, 1, 3}, dl[3] = {0, 5, 9};
    int bli[3] = {2, 1, 3}, dli[3] = {0, 5, 9};
    OK(MPI_Type_indexed_c(3, bl, dl, MPI_INT, &c));
    OK(MPI_Type_indexed(3, bli, dli, MPI_INT, &i));
    MPI_Count k4[] = {3, 2, 1, 3, 0, 5, 9};
    check_pair(c, i, 0, 7, k4, 1, MPI_COMBINER_INDEXED, "indexed");

    MPI_Count db[3] = {0, 20, 44};
    MPI_Aint dba[3] = {0, 20, 44};
    OK(MPI_Type_create_hindexed_c(3, bl, db, MPI_INT, &c));
    OK(MPI_Type_create_hindexed(3, bli, dba, MPI_INT, &i));
    MPI_Count k5[] = {3, 2, 1, 3, 0, 20, 44};
    check_pair(c, i, 0, 7, k5, 1, MPI_COMBINER_HINDEXED, "hindexed");

    OK(MPI_Type_create_indexed_block_c(3, 2, dl, MPI_INT, &c));
    OK(MPI_Type_create_indexed_block(3, 2, dli, MPI_INT, &i));
    MPI_Count k6[] = {3, 2, 0, 5, 9};
    check_pair(c, i, 0, 5, k6, 1, MPI_COMBINER_INDEXED_BLOCK, "indexed_block");

    OK(MPI_Type_create_hindexed_block_c(3, 2, db, MPI_INT, &c));
    OK(MPI_Type_create_hindexed_block(3, 2, dba, MPI_INT, &i));
    MPI_Count k7[] = {3, 2, 0, 20, 44};
    check_pair(c, i, 0, 5, k7, 1, MPI_COMBINER_HINDEXED_BLOCK, "hindexed_block");

    MPI_Count sb[2] = {1, 2}, sd[2] = {4, 16};
    int sbi[2] = {1, 2};
    MPI_Aint sda[2] = {4, 16};
    MPI_Datatype st[2] = {MPI_INT, MPI_INT};
    OK(MPI_Type_create_struct_c(2, sb, sd, st, &c));
    OK(MPI_Type_create_struct(2, sbi, sda, st, &i));
    MPI_Count k8[] = {2, 1, 2, 4, 16};
    check_pair(c, i, 0, 5, k8, 2, MPI_COMBINER_STRUCT, "struct");

    MPI_Count sz[2] = {4, 6}, sub[2] = {2, 3}, stt[2] = {1, 2};
    int szi[2] = {4, 6}, subi[2] = {2, 3}, stti[2] = {1, 2};
    OK(MPI_Type_create_subarray_c(2, sz, sub, stt, MPI_ORDER_FORTRAN, MPI_INT, &c));
    OK(MPI_Type_create_subarray(2, szi, subi, stti, MPI_ORDER_FORTRAN, MPI_INT, &i));
    MPI_Count k9[] = {4, 6, 2, 3, 1, 2};
    check_pair(c, i, 2, 6, k9, 1, MPI_COMBINER_SUBARRAY, "subarray");

    MPI_Count gs[2] = {6, 5};
    int gsi[2] = {6, 5}, dis[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK},
        dar[2] = {2, MPI_DISTRIBUTE_DFLT_DARG}, ps[2] = {2, 1};
    OK(MPI_Type_create_darray_c(2, 1, 2, gs, dis, dar, ps, MPI_ORDER_C, MPI_INT, &c));
    OK(MPI_Type_create_darray(2, 1, 2, gsi, dis, dar, ps, MPI_ORDER_C, MPI_INT, &i));
    MPI_Count k10[] = {6, 5};
    check_pair(c, i, 3 * 2 + 4, 2, k10, 1, MPI_COMBINER_DARRAY, "darray");

    OK(MPI_Type_create_resized_c(MPI_INT, -4, 16, &c));
    OK(MPI_Type_create_resized(MPI_INT, -4, 16, &i));
    MPI_Count k11[] = {-4, 16};
    check_pair(c, i, 0, 2, k11, 1, MPI_COMBINER_RESIZED, "resized");

    /* More than 2^31 bytes: sizes only (nothing is sent). */
    MPI_Datatype big;
    MPI_Count three = 3000000000LL, s = -1;
    OK(MPI_Type_contiguous_c(three, MPI_BYTE, &big));
    OK(MPI_Type_commit(&big));
    OK(MPI_Type_size_c(big, &s));
    CHECK(s == three, "Type_size_c %lld", (long long)s);
    int si = 0;
    OK(MPI_Type_size(big, &si));
    CHECK(si == MPI_UNDEFINED, "Type_size of 3e9 bytes: %d", si);
    MPI_Count lb = -1, ext = -1;
    OK(MPI_Type_get_extent_c(big, &lb, &ext));
    CHECK(lb == 0 && ext == three, "extent %lld", (long long)ext);
    OK(MPI_Pack_size_c(2, big, MPI_COMM_WORLD, &s));
    CHECK(s >= 2 * three, "Pack_size_c %lld", (long long)s);
    MPI_Datatype bigv;
    OK(MPI_Type_vector_c(1LL << 31, 1, 2, MPI_CHAR, &bigv));
    OK(MPI_Type_size_c(bigv, &s));
    CHECK(s == (1LL << 31), "vector_c size %lld", (long long)s);
    OK(MPI_Type_get_extent_c(bigv, &lb, &ext));
    CHECK(ext == (1LL << 32) - 1, "vector_c extent %lld", (long long)ext);
    OK(MPI_Type_free(&big));
    OK(MPI_Type_free(&bigv));

    /* Pack_c / Unpack_c round trip, positions as MPI_Count. */
    MPI_Datatype v;
    OK(MPI_Type_vector_c(4, 1, 3, MPI_INT, &v));
    OK(MPI_Type_commit(&v));
    int data[12], back[12];
    for (int k = 0; k < 12; k++) data[k] = rank + 10 * k, back[k] = -1;
    char packed[64];
    MPI_Count pos = 4;
    OK(MPI_Pack_c(data, 1, v, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == 20, "Pack_c position %lld", (long long)pos);
    pos = 4;
    OK(MPI_Unpack_c(packed, sizeof packed, &pos, back, 1, v, MPI_COMM_WORLD));
    CHECK(pos == 20, "Unpack_c position %lld", (long long)pos);
    for (int k = 0; k < 12; k++) CHECK(back[k] == (k % 3 == 0 ? data[k] : -1), "unpacked int %d: %d", k, back[k]);
    /* Get_elements_c after receiving 3 ints into the 4-int vector. */
    MPI_Status status;
    OK(MPI_Sendrecv(data, 3, MPI_INT, rank, 7, back, 1, v, rank, 7, MPI_COMM_WORLD, &status));
    MPI_Count n = -1;
    OK(MPI_Get_elements_c(&status, v, &n));
    CHECK(n == 3, "Get_elements_c %lld", (long long)n);
    OK(MPI_Get_count_c(&status, v, &n));
    CHECK(n == MPI_UNDEFINED, "Get_count_c of a partial element %lld", (long long)n);
    OK(MPI_Type_free(&v));

    /* Reduce_local_c. */
    long long in[5] = {1, 2, 3, 4, 5}, io[5] = {10, 20, 30, 40, 50};
    OK(MPI_Reduce_local_c(in, io, 5, MPI_LONG_LONG, MPI_SUM));
    for (int k = 0; k < 5; k++) CHECK(io[k] == 11 * (k + 1), "Reduce_local_c %d: %lld", k, io[k]);

    /* MPI_Op_create_c: Allreduce and Reduce_local_c. */
    MPI_Op op;
    OK(MPI_Op_create_c(sum_c, 1, &op));
    int mine[3] = {rank, 2 * rank, 1}, sum[3];
    OK(MPI_Allreduce(mine, sum, 3, MPI_INT, op, MPI_COMM_WORLD));
    int tri = size * (size - 1) / 2;
    CHECK(sum[0] == tri && sum[1] == 2 * tri && sum[2] == size, "user _c sum %d %d %d", sum[0], sum[1], sum[2]);
    OK(MPI_Reduce_local_c(mine, sum, 3, MPI_INT, op));
    CHECK(sum[0] == tri + rank && sum[2] == size + 1, "Reduce_local_c with a _c operation: %d %d", sum[0], sum[2]);
    OK(MPI_Op_free(&op));

    /* Bad input. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype bad;
    CHECK(MPI_Type_contiguous_c(-1, MPI_INT, &bad) != MPI_SUCCESS, "a negative count");
    CHECK(MPI_Type_vector_c(2, 1, 1, MPI_DATATYPE_NULL, &bad) != MPI_SUCCESS, "MPI_DATATYPE_NULL");
    printf("OK type_large %d\n", rank);
    MPI_Finalize();
    return 0;
}
