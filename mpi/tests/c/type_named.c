/* Predefined types found by their parameters: MPI_Type_create_f90_real/complex/integer (the kind
 * gfortran's selected_*_kind picks: size, envelope MPI_COMBINER_F90_*, contents (p, r) or r, used
 * in a message; predefined, so not freed), MPI_Type_match_size (Fortran types of a class and size), and MPI-4.1's
 * MPI_Type_get_value_index (the MINLOC/MAXLOC pair of two types, MPI_DATATYPE_NULL for none;
 * skipped with MPI-4.0 headers, which lack it). Bad arguments give errors. Passes under MPICH as
 * well. */
#include "check.h"

static void f90(MPI_Datatype t, int want_size, int combiner, int ni, const int *ints, const char *what) {
    int sz = -1, gi, ga, gd, comb;
    OK(MPI_Type_size(t, &sz));
    CHECK(sz == want_size, "%s: size %d, expected %d", what, sz, want_size);
    OK(MPI_Type_get_envelope(t, &gi, &ga, &gd, &comb));
    CHECK(comb == combiner && gi == ni && ga == 0 && gd == 0, "%s: envelope %d %d %d %d", what, gi, ga, gd, comb);
    int got[2] = {-5, -5};
    MPI_Aint a[1];
    MPI_Datatype d[1];
    OK(MPI_Type_get_contents(t, 2, 0, 0, got, a, d));
    for (int k = 0; k < ni; k++) CHECK(got[k] == ints[k], "%s: contents %d is %d", what, k, got[k]);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;

    MPI_Datatype r4, r8, c16, i4, i8;
    OK(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r4));
    int p6[2] = {6, MPI_UNDEFINED};
    f90(r4, 4, MPI_COMBINER_F90_REAL, 2, p6, "real(6)");
    OK(MPI_Type_create_f90_real(10, 100, &r8));
    int p10[2] = {10, 100};
    f90(r8, 8, MPI_COMBINER_F90_REAL, 2, p10, "real(10, 100)");
    OK(MPI_Type_create_f90_complex(15, MPI_UNDEFINED, &c16));
    int p15[2] = {15, MPI_UNDEFINED};
    f90(c16, 16, MPI_COMBINER_F90_COMPLEX, 2, p15, "complex(15)");
    OK(MPI_Type_create_f90_integer(9, &i4));
    int r9[1] = {9};
    f90(i4, 4, MPI_COMBINER_F90_INTEGER, 1, r9, "integer(9)");
    OK(MPI_Type_create_f90_integer(10, &i8));
    int r10[1] = {10};
    f90(i8, 8, MPI_COMBINER_F90_INTEGER, 1, r10, "integer(10)");

    /* Used in a message around the ring. */
    double out[3] = {rank + 0.5, rank + 1.5, rank + 2.5}, in[3] = {0};
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    OK(MPI_Sendrecv(out, 3, r8, next, 1, in, 3, r8, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int k = 0; k < 3; k++) CHECK(in[k] == prev + k + 0.5, "real(10) message %d: %g", k, in[k]);
    /* They are predefined: not to be freed (MPICH 4.0.2 lets it and corrupts its handles). */
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen;
    OK(MPI_Get_library_version(version, &vlen));
    if (strstr(version, "nemesis")) {
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        FAILS_WITH(MPI_Type_free(&r8), MPI_ERR_TYPE);
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }

    static const struct {
        int cls, size;
        MPI_Datatype want;
    } match[] = {
        {MPI_TYPECLASS_REAL, 4, MPI_REAL4},         {MPI_TYPECLASS_REAL, 8, MPI_REAL8},
        {MPI_TYPECLASS_INTEGER, 1, MPI_INTEGER1},   {MPI_TYPECLASS_INTEGER, 2, MPI_INTEGER2},
        {MPI_TYPECLASS_INTEGER, 4, MPI_INTEGER4},   {MPI_TYPECLASS_INTEGER, 8, MPI_INTEGER8},
        {MPI_TYPECLASS_COMPLEX, 8, MPI_COMPLEX8},   {MPI_TYPECLASS_COMPLEX, 16, MPI_COMPLEX16},
    };
    for (size_t k = 0; k < sizeof match / sizeof *match; k++) {
        MPI_Datatype t = MPI_DATATYPE_NULL;
        OK(MPI_Type_match_size(match[k].cls, match[k].size, &t));
        CHECK(t == match[k].want, "match_size(%d, %d)", match[k].cls, match[k].size);
    }

#if !(MPI_VERSION == 4 && MPI_SUBVERSION == 0)
    static const MPI_Datatype pairs[][3] = {
        {MPI_FLOAT, MPI_INT, MPI_FLOAT_INT},      {MPI_DOUBLE, MPI_INT, MPI_DOUBLE_INT},
        {MPI_LONG, MPI_INT, MPI_LONG_INT},        {MPI_SHORT, MPI_INT, MPI_SHORT_INT},
        {MPI_INT, MPI_INT, MPI_2INT},             {MPI_LONG_DOUBLE, MPI_INT, MPI_LONG_DOUBLE_INT},
        {MPI_REAL, MPI_REAL, MPI_2REAL},          {MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION, MPI_2DOUBLE_PRECISION},
        {MPI_INTEGER, MPI_INTEGER, MPI_2INTEGER}, {MPI_INT, MPI_DOUBLE, MPI_DATATYPE_NULL},
        {MPI_CHAR, MPI_INT, MPI_DATATYPE_NULL},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        MPI_Datatype t = MPI_INT;
        OK(MPI_Type_get_value_index(pairs[k][0], pairs[k][1], &t));
        CHECK(t == pairs[k][2], "get_value_index pair %d", (int)k);
    }
#endif

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Datatype bad;
    CHECK(MPI_Type_create_f90_real(40, 0, &bad) != MPI_SUCCESS, "real(40)");
    CHECK(MPI_Type_create_f90_integer(30, &bad) != MPI_SUCCESS, "integer(30)");
    CHECK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 3, &bad) != MPI_SUCCESS, "a real of 3 bytes");
    CHECK(MPI_Type_match_size(77, 4, &bad) != MPI_SUCCESS, "typeclass 77");
    printf("OK type_named %d\n", rank);
    MPI_Finalize();
    return 0;
}
