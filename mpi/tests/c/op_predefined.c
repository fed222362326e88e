/* Every predefined reduction on every predefined type MPI-4.1 §6.9.2 allows it on, through MPI_Reduce (a root per
 * pair), MPI_Allreduce and MPI_Reduce_local, at counts 7 and 300: C and Fortran integers, the
 * fixed-size integers, MPI_AINT/OFFSET/COUNT, float/double/long double and the Fortran reals,
 * every complex type (C, C++, Fortran), the logicals, MPI_BYTE, and MINLOC/MAXLOC on every pair
 * type. The expected values come from the same operation done here in C on the element's own C
 * type (small integers: exact in every type). Then pairs the standard does not define give
 * MPI_ERR_OP (those MPICH refuses too, rather than crashing on). Passes under MPICH as well.
 * Not here: MPI_CHAR and MPI_CHARACTER (no operation applies; MPICH takes them as integers),
 * MPI_REAL16 (gfortran's binary128, which MPICH 4.0.2 reduces wrongly and nemesis does
 * not reduce yet) and MPIX_C_FLOAT16. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check.h"

enum { O_MAX, O_MIN, O_SUM, O_PROD, O_LAND, O_BAND, O_LOR, O_BOR, O_LXOR, O_BXOR, O_MINLOC, O_MAXLOC, O_N };
static const char *op_names[O_N] = {"MAX", "MIN", "SUM", "PROD", "LAND", "BAND", "LOR", "BOR", "LXOR", "BXOR", "MINLOC", "MAXLOC"};
static MPI_Op mpi_op(int op) {
    MPI_Op o[O_N] = {MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR, MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC};
    return o[op];
}

#define B(o) (1u << (o))
#define ALL_INT (B(O_MAX) | B(O_MIN) | B(O_SUM) | B(O_PROD) | B(O_LAND) | B(O_LOR) | B(O_LXOR) | B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define F_INT (B(O_MAX) | B(O_MIN) | B(O_SUM) | B(O_PROD) | B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define REAL (B(O_MAX) | B(O_MIN) | B(O_SUM) | B(O_PROD))
#define CPLX (B(O_SUM) | B(O_PROD))
#define LOGIC (B(O_LAND) | B(O_LOR) | B(O_LXOR))
#define BYTES (B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define LOC (B(O_MINLOC) | B(O_MAXLOC))

/* How a type's test values are made. */
enum { V_SIGNED, V_UNSIGNED, V_LOGICAL, V_COMPLEX, V_PAIR };

typedef signed char schar;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef long long llong;
typedef unsigned long long ullong;
typedef long double ldouble;
typedef bool cbool;
typedef MPI_Aint aint;
typedef MPI_Offset offset;
typedef MPI_Count count;

#define LOADS(T)                                                                                           \
    T a, b;                                                                                                \
    memcpy(&a, pa, sizeof a);                                                                              \
    memcpy(&b, pb, sizeof b)

#define INT_TYPE(T)                                                                                        \
    static void set_##T(void *p, long long re, long long im) {                                             \
        (void)im;                                                                                          \
        T v = (T)re;                                                                                       \
        memcpy(p, &v, sizeof v);                                                                           \
    }                                                                                                      \
    static void op_##T(int op, void *pa, const void *pb) {                                                 \
        LOADS(T);                                                                                          \
        switch (op) {                                                                                      \
        case O_MAX: a = a > b ? a : b; break;                                                              \
        case O_MIN: a = a < b ? a : b; break;                                                              \
        case O_SUM: a = (T)(a + b); break;                                                                 \
        case O_PROD: a = (T)(a * b); break;                                                                \
        case O_LAND: a = (T)(a && b); break;                                                               \
        case O_LOR: a = (T)(a || b); break;                                                                \
        case O_LXOR: a = (T)(!a != !b); break;                                                             \
        case O_BAND: a = (T)(a & b); break;                                                                \
        case O_BOR: a = (T)(a | b); break;                                                                 \
        case O_BXOR: a = (T)(a ^ b); break;                                                                \
        }                                                                                                  \
        memcpy(pa, &a, sizeof a);                                                                          \
    }                                                                                                      \
    static int eq_##T(const void *pa, const void *pb) {                                                    \
        LOADS(T);                                                                                          \
        return a == b;                                                                                     \
    }

#define LOGIC_TYPE(T)                                                                                      \
    static void set_##T(void *p, long long re, long long im) {                                             \
        (void)im;                                                                                          \
        T v = re != 0;                                                                                     \
        memcpy(p, &v, sizeof v);                                                                           \
    }                                                                                                      \
    static void op_##T(int op, void *pa, const void *pb) {                                                 \
        LOADS(T);                                                                                          \
        switch (op) {                                                                                      \
        case O_LAND: a = a && b; break;                                                                    \
        case O_LOR: a = a || b; break;                                                                     \
        case O_LXOR: a = !a != !b; break;                                                                  \
        }                                                                                                  \
        memcpy(pa, &a, sizeof a);                                                                          \
    }                                                                                                      \
    static int eq_##T(const void *pa, const void *pb) {                                                    \
        LOADS(T);                                                                                          \
        return a == b;                                                                                     \
    }

#define REAL_TYPE(T)                                                                                       \
    static void set_##T(void *p, long long re, long long im) {                                             \
        (void)im;                                                                                          \
        T v = (T)re;                                                                                       \
        memset(p, 0, sizeof v);                                                                            \
        memcpy(p, &v, sizeof v);                                                                           \
    }                                                                                                      \
    static void op_##T(int op, void *pa, const void *pb) {                                                 \
        LOADS(T);                                                                                          \
        switch (op) {                                                                                      \
        case O_MAX: a = a > b ? a : b; break;                                                              \
        case O_MIN: a = a < b ? a : b; break;                                                              \
        case O_SUM: a = a + b; break;                                                                      \
        case O_PROD: a = a * b; break;                                                                     \
        }                                                                                                  \
        memcpy(pa, &a, sizeof a);                                                                          \
    }                                                                                                      \
    static int eq_##T(const void *pa, const void *pb) {                                                    \
        LOADS(T);                                                                                          \
        return a == b;                                                                                     \
    }

/* A complex number as two parts of real type R. */
#define CPLX_TYPE(R)                                                                                       \
    static void set_c##R(void *p, long long re, long long im) {                                            \
        R v[2] = {(R)re, (R)im};                                                                           \
        memset(p, 0, sizeof v);                                                                            \
        memcpy(p, v, sizeof v);                                                                            \
    }                                                                                                      \
    static void op_c##R(int op, void *pa, const void *pb) {                                                \
        R a[2], b[2], r[2];                                                                                \
        memcpy(a, pa, sizeof a);                                                                           \
        memcpy(b, pb, sizeof b);                                                                           \
        if (op == O_SUM) {                                                                                 \
            r[0] = a[0] + b[0];                                                                            \
            r[1] = a[1] + b[1];                                                                            \
        } else {                                                                                           \
            r[0] = a[0] * b[0] - a[1] * b[1];                                                              \
            r[1] = a[0] * b[1] + a[1] * b[0];                                                              \
        }                                                                                                  \
        memcpy(pa, r, sizeof r);                                                                           \
    }                                                                                                      \
    static int eq_c##R(const void *pa, const void *pb) {                                                   \
        R a[2], b[2];                                                                                      \
        memcpy(a, pa, sizeof a);                                                                           \
        memcpy(b, pb, sizeof b);                                                                           \
        return a[0] == b[0] && a[1] == b[1];                                                               \
    }

/* A MINLOC/MAXLOC pair: the least (greatest) value, the least index among equal values. */
#define PAIR_TYPE(N, V, I)                                                                                 \
    struct N {                                                                                             \
        V v;                                                                                               \
        I i;                                                                                               \
    };                                                                                                     \
    static void set_##N(void *p, long long v, long long i) {                                               \
        struct N x;                                                                                        \
        memset(&x, 0, sizeof x);                                                                           \
        x.v = (V)v;                                                                                        \
        x.i = (I)i;                                                                                        \
        memcpy(p, &x, sizeof x);                                                                           \
    }                                                                                                      \
    static void op_##N(int op, void *pa, const void *pb) {                                                 \
        LOADS(struct N);                                                                                   \
        int better = op == O_MINLOC ? b.v < a.v : b.v > a.v;                                               \
        if (better || (b.v == a.v && b.i < a.i)) memcpy(pa, &b, sizeof b);                                 \
    }                                                                                                      \
    static int eq_##N(const void *pa, const void *pb) {                                                    \
        LOADS(struct N);                                                                                   \
        return a.v == b.v && a.i == b.i;                                                                   \
    }

INT_TYPE(schar)
INT_TYPE(uchar)
INT_TYPE(short)
INT_TYPE(ushort)
INT_TYPE(int)
INT_TYPE(uint)
INT_TYPE(long)
INT_TYPE(ulong)
INT_TYPE(llong)
INT_TYPE(ullong)
INT_TYPE(int8_t)
INT_TYPE(int16_t)
INT_TYPE(int32_t)
INT_TYPE(int64_t)
INT_TYPE(uint8_t)
INT_TYPE(uint16_t)
INT_TYPE(uint32_t)
INT_TYPE(uint64_t)
LOGIC_TYPE(cbool)
INT_TYPE(aint)
INT_TYPE(offset)
INT_TYPE(count)
REAL_TYPE(float)
REAL_TYPE(double)
REAL_TYPE(ldouble)
CPLX_TYPE(float)
CPLX_TYPE(double)
CPLX_TYPE(ldouble)
PAIR_TYPE(float_int, float, int)
PAIR_TYPE(double_int, double, int)
PAIR_TYPE(long_int, long, int)
PAIR_TYPE(short_int, short, int)
PAIR_TYPE(two_int, int, int)
PAIR_TYPE(ldouble_int, long double, int)
PAIR_TYPE(two_float, float, float)
PAIR_TYPE(two_double, double, double)

struct ty {
    const char *name;
    MPI_Datatype dt;
    size_t size;
    unsigned ops;
    int vals;
    void (*set)(void *, long long, long long);
    void (*op)(int, void *, const void *);
    int (*eq)(const void *, const void *);
};

#define T_(name, dt, T, ops, vals) {name, dt, sizeof(T), ops, vals, set_##T, op_##T, eq_##T}
#define TI(dt, T, ops, vals) T_(#dt, dt, T, ops, vals)
#define TC(dt, R) {#dt, dt, 2 * sizeof(R), CPLX, V_COMPLEX, set_c##R, op_c##R, eq_c##R}
#define TP(dt, N) {#dt, dt, sizeof(struct N), LOC, V_PAIR, set_##N, op_##N, eq_##N}

static const struct ty types[] = {
    TI(MPI_SIGNED_CHAR, schar, ALL_INT, V_SIGNED),
    TI(MPI_UNSIGNED_CHAR, uchar, ALL_INT, V_UNSIGNED),
    TI(MPI_SHORT, short, ALL_INT, V_SIGNED),
    TI(MPI_UNSIGNED_SHORT, ushort, ALL_INT, V_UNSIGNED),
    TI(MPI_INT, int, ALL_INT, V_SIGNED),
    TI(MPI_UNSIGNED, uint, ALL_INT, V_UNSIGNED),
    TI(MPI_LONG, long, ALL_INT, V_SIGNED),
    TI(MPI_UNSIGNED_LONG, ulong, ALL_INT, V_UNSIGNED),
    TI(MPI_LONG_LONG_INT, llong, ALL_INT, V_SIGNED),
    TI(MPI_LONG_LONG, llong, ALL_INT, V_SIGNED),
    TI(MPI_UNSIGNED_LONG_LONG, ullong, ALL_INT, V_UNSIGNED),
    TI(MPI_INT8_T, int8_t, ALL_INT, V_SIGNED),
    TI(MPI_INT16_T, int16_t, ALL_INT, V_SIGNED),
    TI(MPI_INT32_T, int32_t, ALL_INT, V_SIGNED),
    TI(MPI_INT64_T, int64_t, ALL_INT, V_SIGNED),
    TI(MPI_UINT8_T, uint8_t, ALL_INT, V_UNSIGNED),
    TI(MPI_UINT16_T, uint16_t, ALL_INT, V_UNSIGNED),
    TI(MPI_UINT32_T, uint32_t, ALL_INT, V_UNSIGNED),
    TI(MPI_UINT64_T, uint64_t, ALL_INT, V_UNSIGNED),
    TI(MPI_AINT, aint, F_INT, V_SIGNED),
    TI(MPI_OFFSET, offset, F_INT, V_SIGNED),
    TI(MPI_COUNT, count, F_INT, V_SIGNED),
    TI(MPI_INTEGER, int, F_INT, V_SIGNED),
    TI(MPI_INTEGER1, int8_t, F_INT, V_SIGNED),
    TI(MPI_INTEGER2, int16_t, F_INT, V_SIGNED),
    TI(MPI_INTEGER4, int32_t, F_INT, V_SIGNED),
    TI(MPI_INTEGER8, int64_t, F_INT, V_SIGNED),
    TI(MPI_BYTE, uchar, BYTES, V_UNSIGNED),
    TI(MPI_C_BOOL, cbool, LOGIC, V_LOGICAL),
    TI(MPI_CXX_BOOL, cbool, LOGIC, V_LOGICAL),
    TI(MPI_LOGICAL, int, LOGIC, V_LOGICAL),
    TI(MPI_FLOAT, float, REAL, V_SIGNED),
    TI(MPI_DOUBLE, double, REAL, V_SIGNED),
    TI(MPI_LONG_DOUBLE, ldouble, REAL, V_SIGNED),
    TI(MPI_REAL, float, REAL, V_SIGNED),
    TI(MPI_DOUBLE_PRECISION, double, REAL, V_SIGNED),
    TI(MPI_REAL4, float, REAL, V_SIGNED),
    TI(MPI_REAL8, double, REAL, V_SIGNED),
    TC(MPI_C_COMPLEX, float),
    TC(MPI_C_FLOAT_COMPLEX, float),
    TC(MPI_C_DOUBLE_COMPLEX, double),
    TC(MPI_C_LONG_DOUBLE_COMPLEX, ldouble),
    TC(MPI_CXX_FLOAT_COMPLEX, float),
    TC(MPI_CXX_DOUBLE_COMPLEX, double),
    TC(MPI_CXX_LONG_DOUBLE_COMPLEX, ldouble),
    TC(MPI_COMPLEX, float),
    TC(MPI_DOUBLE_COMPLEX, double),
    TC(MPI_COMPLEX8, float),
    TC(MPI_COMPLEX16, double),
    TP(MPI_FLOAT_INT, float_int),
    TP(MPI_DOUBLE_INT, double_int),
    TP(MPI_LONG_INT, long_int),
    TP(MPI_SHORT_INT, short_int),
    TP(MPI_2INT, two_int),
    TP(MPI_LONG_DOUBLE_INT, ldouble_int),
    TP(MPI_2INTEGER, two_int),
    TP(MPI_2REAL, two_float),
    TP(MPI_2DOUBLE_PRECISION, two_double),
};
#define NTYPES ((int)(sizeof types / sizeof *types))

static int rank, size;

/* Element i of rank r's data for operation op: small integers, exact in every type, with no
 * overflow of an 8-bit type after 8 ranks' sums or products. */
static void fill(const struct ty *t, int op, int r, int n, char *buf) {
    for (int i = 0; i < n; i++) {
        long long re = 0, im = 0;
        int k = r * 5 + i * 3;
        switch (t->vals) {
        case V_SIGNED:
            if (op == O_PROD) re = (r + i) % 4 == 0 ? 2 : ((r + 2 * i) % 3 == 0 ? -1 : 1);
            else if (op == O_BAND || op == O_BOR || op == O_BXOR) re = (r * 37 + i * 11) % 128 - 64;
            else re = k % 7 - 3;
            break;
        case V_UNSIGNED:
            if (op == O_PROD) re = (r + i) % 4 == 0 ? 2 : 1;
            else if (op == O_BAND || op == O_BOR || op == O_BXOR) re = (r * 37 + i * 11) % 256;
            else re = k % 7;
            break;
        case V_LOGICAL: re = i % 4 == 0 ? 1 : (r + i) % 3 != 0; break;
        case V_COMPLEX:
            if (op == O_PROD) {
                static const int z[5][2] = {{1, 0}, {0, 1}, {-1, 0}, {1, 1}, {0, -1}};
                re = z[(r + i) % 5][0];
                im = z[(r + i) % 5][1];
            } else {
                re = k % 7 - 3;
                im = (r * 3 + i) % 5 - 2;
            }
            break;
        case V_PAIR:
            re = (r * 3 + i) % 5;
            im = (size - r) * 3 + i % 2;
            break;
        }
        t->set(buf + (size_t)i * t->size, re, im);
    }
}

static void check_all(const struct ty *t, int op, const char *call, int n, const char *got, const char *want) {
    for (int i = 0; i < n; i++) {
        size_t o = (size_t)i * t->size;
        CHECK(t->eq(got + o, want + o), "%s %s on %s, count %d: element %d differs", call, op_names[op], t->name, n, i);
    }
}

static void run(int ti, int op, int n) {
    const struct ty *t = &types[ti];
    size_t bytes = (size_t)n * t->size;
    char *in = xmalloc(bytes), *out = xmalloc(bytes), *want = xmalloc(bytes), *other = xmalloc(bytes);
    fill(t, op, rank, n, in);
    /* The reduction over all ranks, in rank order. */
    fill(t, op, 0, n, want);
    for (int r = 1; r < size; r++) {
        fill(t, op, r, n, other);
        for (int i = 0; i < n; i++) t->op(op, want + (size_t)i * t->size, other + (size_t)i * t->size);
    }
    int root = (ti + op) % size;
    memset(out, 0x5a, bytes);
    OK(MPI_Reduce(in, out, n, t->dt, mpi_op(op), root, MPI_COMM_WORLD));
    if (rank == root) check_all(t, op, "MPI_Reduce", n, out, want);
    memset(out, 0x5a, bytes);
    OK(MPI_Allreduce(in, out, n, t->dt, mpi_op(op), MPI_COMM_WORLD));
    check_all(t, op, "MPI_Allreduce", n, out, want);
    /* Reduce_local: inout = other ⊕ inout, other the next rank's data. */
    fill(t, op, (rank + 1) % size, n, other);
    memcpy(out, in, bytes);
    memcpy(want, other, bytes);
    for (int i = 0; i < n; i++) t->op(op, want + (size_t)i * t->size, in + (size_t)i * t->size);
    OK(MPI_Reduce_local(other, out, n, t->dt, mpi_op(op)));
    check_all(t, op, "MPI_Reduce_local", n, out, want);
    free(in);
    free(out);
    free(want);
    free(other);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;
    int pairs = 0;
    for (int ti = 0; ti < NTYPES; ti++) {
        for (int op = 0; op < O_N; op++) {
            if (!(types[ti].ops & B(op))) continue;
            run(ti, op, 7);
            run(ti, op, 300);
            pairs++;
        }
    }
    CHECK(pairs == 326, "%d (operation, type) pairs", pairs);

    /* Pairs the standard does not define: MPI_ERR_OP (checked on arguments, before any data). */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    static const struct {
        MPI_Op op;
        MPI_Datatype dt;
    } bad[] = {
        {MPI_MAX, MPI_BYTE},        {MPI_SUM, MPI_BYTE},          {MPI_BAND, MPI_FLOAT},
        {MPI_BOR, MPI_DOUBLE},      {MPI_BXOR, MPI_LONG_DOUBLE},  {MPI_MAX, MPI_C_FLOAT_COMPLEX},
        {MPI_MIN, MPI_C_DOUBLE_COMPLEX}, {MPI_LAND, MPI_C_DOUBLE_COMPLEX}, {MPI_SUM, MPI_C_BOOL},
        {MPI_MAX, MPI_LOGICAL},     {MPI_BAND, MPI_LOGICAL},      {MPI_MAX, MPI_WCHAR},
        {MPI_SUM, MPI_PACKED},      {MPI_MINLOC, MPI_INT},        {MPI_MAXLOC, MPI_DOUBLE},
        {MPI_SUM, MPI_FLOAT_INT},   {MPI_MAX, MPI_2INT},          {MPI_REPLACE, MPI_INT},
        {MPI_NO_OP, MPI_INT},       {MPI_PROD, MPI_COMPLEX32},
    };
    char a[64] = {0}, b[64] = {0};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        int rc = MPI_Reduce_local(a, b, 1, bad[k].dt, bad[k].op);
        CHECK(class_of(rc) == MPI_ERR_OP, "bad pair %d: class %d, expected MPI_ERR_OP", (int)k, class_of(rc));
        rc = MPI_Allreduce(a, b, 1, bad[k].dt, bad[k].op, MPI_COMM_WORLD);
        CHECK(size == 1 || class_of(rc) == MPI_ERR_OP, "bad pair %d in Allreduce: class %d", (int)k, class_of(rc));
    }
    FAILS_WITH(MPI_Reduce_local(a, b, 1, MPI_INT, MPI_OP_NULL), MPI_ERR_OP);
    printf("OK op_predefined %d\n", rank);
    MPI_Finalize();
    return 0;
}
