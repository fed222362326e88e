/* Struct types with no real data: zero block lengths, zero-size members (contiguous of 0, structs
 * of those), no members at all, MPI_LB/MPI_UB markers (MPI-1, which MPICH keeps): their size,
 * bounds and true bounds, commit, envelope and contents, Pack_size/Pack/Unpack, and messages of
 * them between ranks (a ring) and to oneself; a zero-length member dropped from a struct with
 * data (MPICH's struct-empty-el), a marker-only struct of extent -10 (MPICH's
 * struct-no-real-types). Bad arguments give errors. Passes under MPICH as well. */
#include "check.h"

static int rank, size;

static void bounds(MPI_Datatype t, int want_size, MPI_Aint lb, MPI_Aint ext, MPI_Aint tlb, MPI_Aint text,
                   const char *what) {
    int sz = -1;
    MPI_Aint l = -99, e = -99, tl = -99, te = -99;
    OK(MPI_Type_size(t, &sz));
    OK(MPI_Type_get_extent(t, &l, &e));
    OK(MPI_Type_get_true_extent(t, &tl, &te));
    CHECK(sz == want_size && l == lb && e == ext, "%s: size %d lb %ld extent %ld, expected %d %ld %ld", what, sz,
          (long)l, (long)e, want_size, (long)lb, (long)ext);
    CHECK(tl == tlb && te == text, "%s: true lb %ld true extent %ld, expected %ld %ld", what, (long)tl, (long)te,
          (long)tlb, (long)text);
}

/* The envelope is (ni, na, nd, MPI_COMBINER_STRUCT) and the contents are ints/aints/types. */
static void contents(MPI_Datatype t, int ni, const int *ints, int na, const MPI_Aint *aints, int nd,
                     const MPI_Datatype *types, const char *what) {
    int gi = -1, ga = -1, gd = -1, comb = -1;
    OK(MPI_Type_get_envelope(t, &gi, &ga, &gd, &comb));
    CHECK(gi == ni && ga == na && gd == nd && comb == MPI_COMBINER_STRUCT, "%s: envelope %d %d %d %d", what, gi, ga,
          gd, comb);
    int gints[8];
    MPI_Aint gaints[8];
    MPI_Datatype gtypes[8];
    OK(MPI_Type_get_contents(t, 8, 8, 8, gints, gaints, gtypes));
    for (int k = 0; k < ni; k++) CHECK(gints[k] == ints[k], "%s: integer %d is %d", what, k, gints[k]);
    for (int k = 0; k < na; k++) CHECK(gaints[k] == aints[k], "%s: address %d is %ld", what, k, (long)gaints[k]);
    for (int k = 0; k < nd; k++) {
        int a, b, c, comb2;
        OK(MPI_Type_get_envelope(gtypes[k], &a, &b, &c, &comb2));
        if (comb2 == MPI_COMBINER_NAMED) {
            CHECK(gtypes[k] == types[k], "%s: type %d", what, k);
        } else {
            int s1, s2;
            OK(MPI_Type_size(gtypes[k], &s1));
            OK(MPI_Type_size(types[k], &s2));
            CHECK(s1 == s2, "%s: derived type %d has size %d, not %d", what, k, s1, s2);
            OK(MPI_Type_free(&gtypes[k]));
        }
    }
}

/* A type of size 0: packs to nothing, travels as an empty message to the next rank and to
 * oneself, leaves the buffers alone. */
static void moves_nothing(MPI_Datatype t, const char *what) {
    char buf[64], packed[16];
    memset(buf, 7, sizeof buf);
    int psz = -1, pos = 0;
    OK(MPI_Pack_size(3, t, MPI_COMM_WORLD, &psz));
    CHECK(psz >= 0, "%s: Pack_size %d", what, psz);
    OK(MPI_Pack(buf + 16, 3, t, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == 0, "%s: Pack moved the position to %d", what, pos);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Status st;
    OK(MPI_Sendrecv(buf + 16, 2, t, next, 5, buf + 32, 2, t, prev, 5, MPI_COMM_WORLD, &st));
    int n = -1;
    OK(MPI_Get_count(&st, t, &n));
    CHECK(n == 0, "%s: Get_count %d", what, n);
    OK(MPI_Get_elements(&st, t, &n));
    CHECK(n == 0, "%s: Get_elements %d", what, n);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 5, "%s: status source %d tag %d", what, st.MPI_SOURCE, st.MPI_TAG);
    MPI_Request r;
    OK(MPI_Irecv(buf + 32, 4, t, 0, 6, MPI_COMM_SELF, &r));
    OK(MPI_Send(buf + 16, 4, t, 0, 6, MPI_COMM_SELF));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Get_count(&st, t, &n));
    CHECK(n == 0, "%s: Get_count to self %d", what, n);
    OK(MPI_Bcast(buf + 16, 5, t, size - 1, MPI_COMM_WORLD));
    for (size_t k = 0; k < sizeof buf; k++) CHECK(buf[k] == 7, "%s: byte %d written", what, (int)k);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;

    /* Zero block lengths only. */
    MPI_Datatype zero_bl, no_members, empty, of_empties;
    int bl0[2] = {0, 0};
    MPI_Aint d08[2] = {0, 8};
    MPI_Datatype id[2] = {MPI_INT, MPI_DOUBLE};
    OK(MPI_Type_create_struct(2, bl0, d08, id, &zero_bl));
    OK(MPI_Type_commit(&zero_bl));
    bounds(zero_bl, 0, 0, 0, 0, 0, "zero block lengths");
    int ints_zb[3] = {2, 0, 0};
    contents(zero_bl, 3, ints_zb, 2, d08, 2, id, "zero block lengths");
    moves_nothing(zero_bl, "zero block lengths");

    /* No members at all. */
    OK(MPI_Type_create_struct(0, bl0, d08, id, &no_members));
    OK(MPI_Type_commit(&no_members));
    bounds(no_members, 0, 0, 0, 0, 0, "no members");
    int ints_nm[1] = {0};
    contents(no_members, 1, ints_nm, 0, NULL, 0, NULL, "no members");
    moves_nothing(no_members, "no members");

    /* Members of size 0: a contiguous of none, and the struct above, three of it at 8. */
    OK(MPI_Type_contiguous(0, MPI_INT, &empty));
    int bl13[2] = {1, 3};
    MPI_Datatype ez[2] = {empty, zero_bl};
    OK(MPI_Type_create_struct(2, bl13, d08, ez, &of_empties));
    OK(MPI_Type_commit(&of_empties));
    bounds(of_empties, 0, 0, 0, 0, 0, "zero-size members");
    int ints_oe[3] = {2, 1, 3};
    contents(of_empties, 3, ints_oe, 2, d08, 2, ez, "zero-size members");
    moves_nothing(of_empties, "zero-size members");

    /* A zero-length member dropped from a struct with data: ints at 0, 8, 12 (extent 16). */
    MPI_Datatype dropped;
    int bl012[3] = {0, 1, 2};
    MPI_Aint d808[3] = {8, 0, 8};
    MPI_Datatype fii[3] = {MPI_FLOAT, MPI_INT, MPI_INT};
    OK(MPI_Type_create_struct(3, bl012, d808, fii, &dropped));
    OK(MPI_Type_commit(&dropped));
    bounds(dropped, 12, 0, 16, 0, 16, "a dropped member");
    int got[8], want[8] = {1, -1, 2, 3, 4, -1, 5, 6}, sent[6] = {1, 2, 3, 4, 5, 6};
    for (int k = 0; k < 8; k++) got[k] = -1;
    MPI_Request r;
    MPI_Status st;
    OK(MPI_Irecv(got, 2, dropped, 0, 0, MPI_COMM_SELF, &r));
    OK(MPI_Send(sent, 6, MPI_INT, 0, 0, MPI_COMM_SELF));
    OK(MPI_Wait(&r, &st));
    for (int k = 0; k < 8; k++) CHECK(got[k] == want[k], "dropped member: int %d is %d, not %d", k, got[k], want[k]);
    int n = -1;
    OK(MPI_Get_count(&st, dropped, &n));
    CHECK(n == 2, "dropped member: Get_count %d", n);
    OK(MPI_Get_elements(&st, dropped, &n));
    CHECK(n == 6, "dropped member: Get_elements %d", n);
    /* Around the ring, rank-dependent data. */
    int mine[8], theirs[8];
    for (int k = 0; k < 8; k++) mine[k] = rank * 100 + k, theirs[k] = -1;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    OK(MPI_Sendrecv(mine, 2, dropped, next, 1, theirs, 2, dropped, prev, 1, MPI_COMM_WORLD, &st));
    for (int k = 0; k < 8; k++) {
        int w = (k == 1 || k == 5) ? -1 : prev * 100 + k;
        CHECK(theirs[k] == w, "ring: int %d is %d, not %d", k, theirs[k], w);
    }
    char packed[64];
    int pos = 0;
    OK(MPI_Pack(mine, 2, dropped, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == 24, "dropped member: packed %d bytes", pos);

    /* MPI_LB and MPI_UB markers. */
    MPI_Datatype lb_only, marked;
    int one = 1;
    MPI_Aint ten = 10;
    MPI_Datatype lbt = MPI_LB;
    OK(MPI_Type_create_struct(1, &one, &ten, &lbt, &lb_only));
    OK(MPI_Type_commit(&lb_only));
    bounds(lb_only, 0, 10, -10, 0, 0, "{ (LB, 10) }");
    int bl121[3] = {1, 2, 1};
    MPI_Aint dm[3] = {-4, 0, 20};
    MPI_Datatype liu[3] = {MPI_LB, MPI_INT, MPI_UB};
    OK(MPI_Type_create_struct(3, bl121, dm, liu, &marked));
    OK(MPI_Type_commit(&marked));
    bounds(marked, 8, -4, 24, 0, 8, "{ (LB, -4), int, int, (UB, 20) }");
    int ring[12], back[12];
    for (int k = 0; k < 12; k++) ring[k] = rank * 10 + k, back[k] = -1;
    /* Two elements from ring[1]: ints 1, 2 and 7, 8 (extent 24). */
    OK(MPI_Sendrecv(ring + 1, 2, marked, next, 2, back + 1, 2, marked, prev, 2, MPI_COMM_WORLD, &st));
    for (int k = 0; k < 12; k++) {
        int w = (k == 1 || k == 2 || k == 7 || k == 8) ? prev * 10 + k : -1;
        CHECK(back[k] == w, "markers: int %d is %d, not %d", k, back[k], w);
    }

    /* Bad input. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype bad;
    CHECK(MPI_Type_create_struct(-1, bl0, d08, id, &bad) != MPI_SUCCESS, "a negative count");
    int neg[2] = {1, -1};
    CHECK(MPI_Type_create_struct(2, neg, d08, id, &bad) != MPI_SUCCESS, "a negative block length");
    MPI_Datatype nulls[2] = {MPI_INT, MPI_DATATYPE_NULL};
    CHECK(MPI_Type_create_struct(2, bl13, d08, nulls, &bad) != MPI_SUCCESS, "MPI_DATATYPE_NULL");

    MPI_Datatype all[7] = {zero_bl, no_members, empty, of_empties, dropped, lb_only, marked};
    for (int k = 0; k < 7; k++) OK(MPI_Type_free(&all[k]));
    printf("OK type_empty %d\n", rank);
    MPI_Finalize();
    return 0;
}
