/* MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size (and _c) with "external32":
 * big-endian bytes with the standard's sizes (long 4, wchar_t 2), checked byte by byte for int,
 * short, long, unsigned long, long long, float, double, a complex type, a strided vector of
 * doubles; round trips restore the data; positions advance and accumulate; rank 0 packs and
 * rank 1 unpacks what it receives as MPI_BYTE; an unknown representation and a short buffer give
 * errors (on nemesis). Passes under MPICH as well. */
#include <stdint.h>

#include "check.h"

static void expect_bytes(const unsigned char *got, const unsigned char *want, int n, const char *what) {
    for (int k = 0; k < n; k++)
        CHECK(got[k] == want[k], "%s: byte %d is %02x, not %02x", what, k, got[k], want[k]);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;
    char ext32[] = "external32";

    static const struct {
        MPI_Datatype t;
        MPI_Aint size;
    } sizes[] = {{MPI_CHAR, 1},   {MPI_SHORT, 2},        {MPI_INT, 4},          {MPI_LONG, 4},
                 {MPI_UNSIGNED_LONG, 4}, {MPI_LONG_LONG, 8}, {MPI_FLOAT, 4},     {MPI_DOUBLE, 8},
                 {MPI_LONG_DOUBLE, 16},  {MPI_WCHAR, 2},     {MPI_C_BOOL, 1},    {MPI_AINT, 8},
                 {MPI_C_DOUBLE_COMPLEX, 16}, {MPI_INTEGER, 4}, {MPI_LOGICAL, 4}, {MPI_DOUBLE_PRECISION, 8}};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        MPI_Aint s = -1;
        OK(MPI_Pack_external_size(ext32, 3, sizes[k].t, &s));
        CHECK(s == 3 * sizes[k].size, "external32 size of type %d: %ld", (int)k, (long)s);
        MPI_Count sc = -1;
        OK(MPI_Pack_external_size_c(ext32, 3, sizes[k].t, &sc));
        CHECK(sc == 3 * sizes[k].size, "external32 size_c of type %d: %lld", (int)k, (long long)sc);
    }

    /* Byte by byte, and back. */
    unsigned char buf[256];
    MPI_Aint pos = 0;
    int i = 0x01020304;
    short sh = -2;
    long l = -3;
    unsigned long ul = 0x11223344UL;
    long long ll = 0x0102030405060708LL;
    float f = 1.5f;
    double d = -2.0;
    OK(MPI_Pack_external(ext32, &i, 1, MPI_INT, buf, sizeof buf, &pos));
    OK(MPI_Pack_external(ext32, &sh, 1, MPI_SHORT, buf, sizeof buf, &pos));
    OK(MPI_Pack_external(ext32, &l, 1, MPI_LONG, buf, sizeof buf, &pos));
    OK(MPI_Pack_external(ext32, &ul, 1, MPI_UNSIGNED_LONG, buf, sizeof buf, &pos));
    OK(MPI_Pack_external(ext32, &ll, 1, MPI_LONG_LONG, buf, sizeof buf, &pos));
    OK(MPI_Pack_external(ext32, &f, 1, MPI_FLOAT, buf, sizeof buf, &pos));
    OK(MPI_Pack_external(ext32, &d, 1, MPI_DOUBLE, buf, sizeof buf, &pos));
    static const unsigned char want[] = {1,    2,    3,    4,    0xff, 0xfe, 0xff, 0xff, 0xff, 0xfd, 0x11,
                                         0x22, 0x33, 0x44, 1,    2,    3,    4,    5,    6,    7,    8,
                                         0x3f, 0xc0, 0,    0,    0xc0, 0,    0,    0,    0,    0,    0,    0};
    CHECK(pos == (MPI_Aint)sizeof want, "position %ld", (long)pos);
    expect_bytes(buf, want, sizeof want, "scalars");
    int i2;
    short sh2;
    long l2;
    unsigned long ul2;
    long long ll2;
    float f2;
    double d2;
    pos = 0;
    OK(MPI_Unpack_external(ext32, buf, sizeof want, &pos, &i2, 1, MPI_INT));
    OK(MPI_Unpack_external(ext32, buf, sizeof want, &pos, &sh2, 1, MPI_SHORT));
    OK(MPI_Unpack_external(ext32, buf, sizeof want, &pos, &l2, 1, MPI_LONG));
    OK(MPI_Unpack_external(ext32, buf, sizeof want, &pos, &ul2, 1, MPI_UNSIGNED_LONG));
    OK(MPI_Unpack_external(ext32, buf, sizeof want, &pos, &ll2, 1, MPI_LONG_LONG));
    OK(MPI_Unpack_external(ext32, buf, sizeof want, &pos, &f2, 1, MPI_FLOAT));
    OK(MPI_Unpack_external(ext32, buf, sizeof want, &pos, &d2, 1, MPI_DOUBLE));
    CHECK(i2 == i && sh2 == sh && l2 == l && ul2 == ul && ll2 == ll && f2 == f && d2 == d,
          "round trip: %d %d %ld %lu %lld %g %g", i2, sh2, l2, ul2, ll2, f2, d2);

    /* A strided vector of doubles, through the _c forms. */
    double grid[9], back[9];
    for (int k = 0; k < 9; k++) grid[k] = k + 0.25, back[k] = -1;
    MPI_Datatype v;
    OK(MPI_Type_vector(3, 1, 4, MPI_DOUBLE, &v));
    OK(MPI_Type_commit(&v));
    MPI_Count cpos = 8;
    OK(MPI_Pack_external_c(ext32, grid, 1, v, buf, sizeof buf, &cpos));
    CHECK(cpos == 32, "vector: position %lld", (long long)cpos);
    for (int k = 0; k < 3; k++) {
        double x = grid[4 * k];
        unsigned char be[8];
        uint64_t u;
        memcpy(&u, &x, 8);
        for (int b = 0; b < 8; b++) be[b] = (unsigned char)(u >> (56 - 8 * b));
        expect_bytes(buf + 8 + 8 * k, be, 8, "vector element");
    }
    cpos = 8;
    OK(MPI_Unpack_external_c(ext32, buf, sizeof buf, &cpos, back, 1, v));
    for (int k = 0; k < 9; k++) CHECK(back[k] == (k % 4 == 0 ? grid[k] : -1), "vector round trip %d: %g", k, back[k]);

    /* Complex: each part big-endian. */
    double z[2] = {1.0, -1.0};
    pos = 0;
    OK(MPI_Pack_external(ext32, z, 1, MPI_C_DOUBLE_COMPLEX, buf, sizeof buf, &pos));
    static const unsigned char wz[16] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xbf, 0xf0, 0, 0, 0, 0, 0, 0};
    expect_bytes(buf, wz, 16, "complex");

    /* Packed on rank 0, sent as bytes, unpacked on rank 1. */
    if (size > 1 && rank < 2) {
        int vals[4] = {7, -8, 9, -10}, got[4] = {0};
        if (rank == 0) {
            pos = 0;
            OK(MPI_Pack_external(ext32, vals, 4, MPI_INT, buf, sizeof buf, &pos));
            OK(MPI_Send(buf, (int)pos, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
        } else {
            OK(MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            pos = 0;
            OK(MPI_Unpack_external(ext32, buf, 16, &pos, got, 4, MPI_INT));
            for (int k = 0; k < 4; k++) CHECK(got[k] == vals[k], "received int %d: %d", k, got[k]);
        }
    }

    /* Bad input (MPICH 4.0.2 checks neither: nemesis only). */
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen;
    OK(MPI_Get_library_version(version, &vlen));
    if (strstr(version, "nemesis")) {
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        pos = 0;
        FAILS_WITH(MPI_Pack_external(ext32, grid, 4, MPI_DOUBLE, buf, 16, &pos), MPI_ERR_TRUNCATE);
        CHECK(pos == 0, "a failed pack moved the position to %ld", (long)pos);
        char native[] = "native";
        FAILS_WITH(MPI_Pack_external(native, grid, 1, MPI_DOUBLE, buf, 16, &pos), MPI_ERR_ARG);
        pos = 0;
        FAILS_WITH(MPI_Unpack_external(ext32, buf, 4, &pos, back, 1, MPI_DOUBLE), MPI_ERR_TRUNCATE);
    }
    OK(MPI_Type_free(&v));
    printf("OK type_external %d\n", rank);
    MPI_Finalize();
    return 0;
}
