/* MPICH's binary interface: built with Debian's mpicc.mpich (MPICH's mpi.h, libmpich.so.12) and run
 * on nemesis's library (nemesis-run --mpich-abi, or LD_LIBRARY_PATH under mpiexec.hydra), and
 * built with this project's mpicc too. Checks that the library is nemesis's, that the predefined
 * datatypes have their C sizes and move their values, that statuses read as MPICH lays them out
 * (source, tag, count; MPI_PROC_NULL and MPI_ANY_SOURCE with MPICH's values), that error codes are
 * MPICH's classes, and that the symbols MPICH's header references (MPI_F_STATUS_IGNORE,
 * MPI_UNWEIGHTED, MPI_COMM_DUP_FN...) exist. Prints "OK abi <rank>". Any number of ranks >= 2. */
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>
#include <wchar.h>

#include "check.h"

/* A value of `size` bytes that rank `rank` sends as element `i` of the type list. */
static void fill(unsigned char *v, int size, int rank, int i) {
    for (int k = 0; k < size; k++) v[k] = (unsigned char)(rank * 31 + k * 7 + i + 1);
}

/* Sends one element of `dt` to the next rank and checks the previous rank's arrives intact. */
static void ring_one(int i, int size, MPI_Datatype dt, int rank, int nranks, const char *name) {
    unsigned char v[64], want[64], in[64];
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    fill(v, size, rank, i);
    fill(want, size, prev, i);
    memset(in, 0xee, sizeof in);
    MPI_Status st;
    OK(MPI_Sendrecv(v, 1, dt, next, 7, in, 1, dt, prev, 7, MPI_COMM_WORLD, &st));
    CHECK(memcmp(in, want, (size_t)size) == 0 && in[size] == 0xee, "%s: the value changed on the way", name);
    int count = -1;
    OK(MPI_Get_count(&st, dt, &count));
    CHECK(count == 1 && st.MPI_SOURCE == prev && st.MPI_TAG == 7, "%s: count %d source %d tag %d", name, count,
          st.MPI_SOURCE, st.MPI_TAG);
}

int main(int argc, char **argv) {
    int provided = -1, rank, nranks;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    CHECK(provided == MPI_THREAD_FUNNELED, "provided %d", provided);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    check_rank = rank;
    CHECK(nranks >= 2, "needs 2 ranks");

    /* The library is nemesis's, whichever header the program was built with. */
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    OK(MPI_Get_library_version(version, &len));
    CHECK(strncmp(version, "nemesis-mpi", 11) == 0 && len == (int)strlen(version), "library: %s", version);

    /* MPICH's values, whichever header. */
    CHECK(MPI_PROC_NULL == -1 && MPI_ANY_SOURCE == -2 && MPI_ANY_TAG == -1, "special ranks");
    CHECK(MPI_COMM_WORLD == 0x44000000 && MPI_INT == 0x4c000405 && MPI_SUM == 0x58000003, "handles");
    CHECK(sizeof(MPI_Status) == 5 * sizeof(int), "status size %zu", sizeof(MPI_Status));
    CHECK(MPI_ERR_RANK == 6 && MPI_ERR_REQUEST == 19 && MPI_ERR_TRUNCATE == 14, "error classes");

    /* Every predefined C type: its size, and a value around the ring. */
    struct {
        MPI_Datatype dt;
        int size;
        const char *name;
    } types[] = {
        {MPI_CHAR, sizeof(char), "MPI_CHAR"},
        {MPI_SIGNED_CHAR, sizeof(signed char), "MPI_SIGNED_CHAR"},
        {MPI_UNSIGNED_CHAR, sizeof(unsigned char), "MPI_UNSIGNED_CHAR"},
        {MPI_BYTE, 1, "MPI_BYTE"},
        {MPI_WCHAR, sizeof(wchar_t), "MPI_WCHAR"},
        {MPI_SHORT, sizeof(short), "MPI_SHORT"},
        {MPI_UNSIGNED_SHORT, sizeof(unsigned short), "MPI_UNSIGNED_SHORT"},
        {MPI_INT, sizeof(int), "MPI_INT"},
        {MPI_UNSIGNED, sizeof(unsigned), "MPI_UNSIGNED"},
        {MPI_LONG, sizeof(long), "MPI_LONG"},
        {MPI_UNSIGNED_LONG, sizeof(unsigned long), "MPI_UNSIGNED_LONG"},
        {MPI_LONG_LONG_INT, sizeof(long long), "MPI_LONG_LONG_INT"},
        {MPI_LONG_LONG, sizeof(long long), "MPI_LONG_LONG"},
        {MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long), "MPI_UNSIGNED_LONG_LONG"},
        {MPI_FLOAT, sizeof(float), "MPI_FLOAT"},
        {MPI_DOUBLE, sizeof(double), "MPI_DOUBLE"},
        {MPI_LONG_DOUBLE, sizeof(long double), "MPI_LONG_DOUBLE"},
        {MPI_INT8_T, 1, "MPI_INT8_T"},
        {MPI_INT16_T, 2, "MPI_INT16_T"},
        {MPI_INT32_T, 4, "MPI_INT32_T"},
        {MPI_INT64_T, 8, "MPI_INT64_T"},
        {MPI_UINT8_T, 1, "MPI_UINT8_T"},
        {MPI_UINT16_T, 2, "MPI_UINT16_T"},
        {MPI_UINT32_T, 4, "MPI_UINT32_T"},
        {MPI_UINT64_T, 8, "MPI_UINT64_T"},
        {MPI_C_BOOL, sizeof(bool), "MPI_C_BOOL"},
        {MPI_C_FLOAT_COMPLEX, sizeof(float _Complex), "MPI_C_FLOAT_COMPLEX"},
        {MPI_C_COMPLEX, sizeof(float _Complex), "MPI_C_COMPLEX"},
        {MPI_C_DOUBLE_COMPLEX, sizeof(double _Complex), "MPI_C_DOUBLE_COMPLEX"},
        {MPI_C_LONG_DOUBLE_COMPLEX, sizeof(long double _Complex), "MPI_C_LONG_DOUBLE_COMPLEX"},
        {MPI_AINT, sizeof(MPI_Aint), "MPI_AINT"},
        {MPI_OFFSET, sizeof(MPI_Offset), "MPI_OFFSET"},
        {MPI_COUNT, sizeof(MPI_Count), "MPI_COUNT"},
        {MPI_PACKED, 1, "MPI_PACKED"},
        {MPI_2INT, 2 * sizeof(int), "MPI_2INT"},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int size = -1;
        OK(MPI_Type_size(types[i].dt, &size));
        CHECK(size == types[i].size, "%s: size %d, sizeof %d", types[i].name, size, types[i].size);
        ring_one((int)i, size, types[i].dt, rank, nranks, types[i].name);
    }

    /* Statuses: a count above 2^16 elements, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_PROC_NULL. */
    int n = 100000;
    int *big = xmalloc((size_t)n * sizeof(int));
    MPI_Status st;
    if (rank == 0) {
        for (int k = 0; k < n; k++) big[k] = k ^ 0x5a5a;
        OK(MPI_Send(big, n, MPI_INT, 1, 42, MPI_COMM_WORLD));
    } else if (rank == 1) {
        memset(&st, 0x77, sizeof st);
        OK(MPI_Recv(big, n, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        int count = -1;
        OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == n && st.MPI_SOURCE == 0 && st.MPI_TAG == 42, "count %d source %d tag %d", count, st.MPI_SOURCE,
              st.MPI_TAG);
        CHECK(st.count_lo == (int)(n * sizeof(int)) && st.count_hi_and_cancelled == 0,
              "MPICH's status layout: count_lo %d count_hi_and_cancelled %d", st.count_lo, st.count_hi_and_cancelled);
        for (int k = 0; k < n; k++) CHECK(big[k] == (k ^ 0x5a5a), "element %d", k);
    }
    free(big);
    OK(MPI_Recv(NULL, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    int count = -1;
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && count == 0, "PROC_NULL status");
    OK(MPI_Send(NULL, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    MPI_Request reqs[2];
    int a = rank, b = -1;
    OK(MPI_Irecv(&b, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &reqs[0]));
    OK(MPI_Isend(&a, 1, MPI_INT, (rank + 1) % nranks, 3, MPI_COMM_WORLD, &reqs[1]));
    OK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
    CHECK(b == (rank + nranks - 1) % nranks && reqs[0] == MPI_REQUEST_NULL, "waitall: %d", b);

    /* Collectives with MPICH's operation handles and MPI_IN_PLACE. */
    double d = rank + 0.5;
    OK(MPI_Allreduce(MPI_IN_PLACE, &d, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    CHECK(d == nranks * (nranks - 1) / 2.0 + 0.5 * nranks, "allreduce sum %f", d);
    long m = rank * 10;
    long mx = -1;
    OK(MPI_Allreduce(&m, &mx, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD));
    CHECK(mx == (nranks - 1) * 10, "allreduce max %ld", mx);

    /* Error classes as MPICH numbers them. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int x = 0;
    FAILS_WITH(MPI_Send(&x, 1, MPI_INT, nranks, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    FAILS_WITH(MPI_Send(&x, 1, MPI_INT, 0, -5, MPI_COMM_WORLD), MPI_ERR_TAG);
    FAILS_WITH(MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    FAILS_WITH(MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    FAILS_WITH(MPI_Allreduce(&x, &a, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
    MPI_Request bad = MPI_REQUEST_NULL + 5;
    FAILS_WITH(MPI_Wait(&bad, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
    char text[MPI_MAX_ERROR_STRING];
    OK(MPI_Error_string(MPI_ERR_TRUNCATE, text, &len));
    CHECK(strstr(text, "MPI_ERR_TRUNCATE") != NULL, "%s", text);

    /* The symbols MPICH's header references. */
    CHECK(MPI_F_STATUS_IGNORE != NULL && MPI_F_STATUSES_IGNORE != NULL && MPI_F_STATUS_IGNORE != MPI_F_STATUSES_IGNORE,
          "MPI_F_STATUS(ES)_IGNORE");
    CHECK(MPI_UNWEIGHTED != NULL && MPI_WEIGHTS_EMPTY != NULL && MPI_UNWEIGHTED != MPI_WEIGHTS_EMPTY, "weights");
    CHECK(MPI_F08_STATUS_IGNORE != NULL && MPI_F08_STATUSES_IGNORE != NULL, "MPI_F08_STATUS(ES)_IGNORE");
    void *in = &x, *out = NULL;
    int flag = 0;
    OK(MPI_COMM_DUP_FN(MPI_COMM_WORLD, 0, NULL, in, &out, &flag));
    CHECK(out == in && flag == 1, "MPI_COMM_DUP_FN");
    OK(MPI_TYPE_DUP_FN(MPI_INT, 0, NULL, in, &out, &flag));
    CHECK(MPI_COMM_NULL_COPY_FN == NULL && MPI_TYPE_NULL_DELETE_FN == NULL, "null callbacks");

    printf("OK abi %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
