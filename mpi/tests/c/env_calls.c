/* The environment calls of MPI-4.1 beyond MPI-3.1, checked at any number of ranks:
 * - MPI_T (the tool interface): initialized before MPI_Init and nested, no variable, category,
 *   event or source (every count 0, every index MPI_T_ERR_INVALID_INDEX, every name
 *   MPI_T_ERR_INVALID_NAME), performance-variable sessions, MPI_T_PVAR_ALL_HANDLES, finalized
 *   after MPI_Finalize; errors returned, never fatal;
 * - MPI_Remove_error_class/code/string after MPI_Add_error_*, and the refusals;
 * - MPI_Abi_get_version (-1: MPICH's ABI, not the standard one) and MPI_Abi_get_info;
 * - MPI_Get_hw_resource_info;
 * - MPI_Cart_map and MPI_Graph_map: the identity on the first ranks, MPI_UNDEFINED beyond, and
 *   MPICH's answers to bad input.
 * Prints "OK env_calls <rank>". */
#include "check.h"

#define T_RETURNS(call, code)                                                                              \
    do {                                                                                                   \
        int rc_ = (call);                                                                                  \
        CHECK(rc_ == (code), "%s returned %d, expected %d (%s)", #call, rc_, (code), #code);               \
    } while (0)

static void tools_before_init(void) {
    int provided = -1, n = -1;
    T_RETURNS(MPI_T_finalize(), MPI_T_ERR_NOT_INITIALIZED);
    T_RETURNS(MPI_T_cvar_get_num(&n), MPI_T_ERR_NOT_INITIALIZED);
    OK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK(provided == MPI_THREAD_SINGLE, "MPI_T provided %d", provided);
    OK(MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE, "MPI_T provided %d", provided);
}

static void tools(void) {
    int n;
    int (*counts[])(int *) = {MPI_T_cvar_get_num, MPI_T_pvar_get_num, MPI_T_category_get_num,
                              MPI_T_event_get_num, MPI_T_source_get_num, MPI_T_category_changed};
    for (unsigned i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        n = -1;
        OK(counts[i](&n));
        CHECK(n == 0, "count %u: %d", i, n);
    }
    char name[64], desc[64];
    int len = 64, dlen = 64, verbosity, bind, scope, klass, ro, cont, atomic, a, b, c, idx;
    MPI_Datatype dt;
    MPI_T_enum e = NULL;
    T_RETURNS(MPI_T_cvar_get_info(0, name, &len, &verbosity, &dt, &e, desc, &dlen, &bind, &scope),
              MPI_T_ERR_INVALID_INDEX);
    T_RETURNS(MPI_T_pvar_get_info(0, name, &len, &verbosity, &klass, &dt, &e, desc, &dlen, &bind, &ro, &cont, &atomic),
              MPI_T_ERR_INVALID_INDEX);
    T_RETURNS(MPI_T_category_get_info(0, name, &len, desc, &dlen, &a, &b, &c), MPI_T_ERR_INVALID_INDEX);
    T_RETURNS(MPI_T_cvar_get_index("MPIR_CVAR_ASYNC_PROGRESS", &idx), MPI_T_ERR_INVALID_NAME);
    T_RETURNS(MPI_T_pvar_get_index("nothing", 0, &idx), MPI_T_ERR_INVALID_NAME);
    MPI_T_cvar_handle ch;
    T_RETURNS(MPI_T_cvar_handle_alloc(0, NULL, &ch, &n), MPI_T_ERR_INVALID_INDEX);
    T_RETURNS(MPI_T_cvar_read(NULL, &n), MPI_T_ERR_INVALID_HANDLE);
    T_RETURNS(MPI_T_enum_get_info(NULL, &n, name, &len), MPI_T_ERR_INVALID_HANDLE);
    MPI_Count ts;
    T_RETURNS(MPI_T_source_get_timestamp(0, &ts), MPI_T_ERR_INVALID_INDEX);
    MPI_T_pvar_session s = NULL, gone;
    MPI_T_pvar_handle h;
    OK(MPI_T_pvar_session_create(&s));
    CHECK(s != NULL, "no pvar session");
    T_RETURNS(MPI_T_pvar_handle_alloc(s, 0, NULL, &h, &n), MPI_T_ERR_INVALID_INDEX);
    OK(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES));
    OK(MPI_T_pvar_stop(s, MPI_T_PVAR_ALL_HANDLES));
    T_RETURNS(MPI_T_pvar_read(s, MPI_T_PVAR_ALL_HANDLES, &n), MPI_T_ERR_INVALID_HANDLE);
    gone = s;
    OK(MPI_T_pvar_session_free(&s));
    CHECK(s == NULL, "freed session not null");
    T_RETURNS(MPI_T_pvar_start(gone, MPI_T_PVAR_ALL_HANDLES), MPI_T_ERR_INVALID_SESSION);
    T_RETURNS(MPI_T_pvar_session_free(&gone), MPI_T_ERR_INVALID_SESSION);
}

static void error_removal(void) {
    int klass, code, code2, k = -1;
    char s[MPI_MAX_ERROR_STRING];
    int len;
    OK(MPI_Add_error_class(&klass));
    OK(MPI_Add_error_code(klass, &code));
    OK(MPI_Add_error_string(code, "a code of ours"));
    OK(MPI_Error_string(code, s, &len));
    CHECK(strcmp(s, "a code of ours") == 0, "string %s", s);
    FAILS_WITH(MPI_Remove_error_class(klass), MPI_ERR_ARG); /* a code still belongs to it */
    FAILS_WITH(MPI_Remove_error_class(MPI_ERR_RANK), MPI_ERR_ARG);
    FAILS_WITH(MPI_Remove_error_code(MPI_ERR_RANK), MPI_ERR_ARG);
    FAILS_WITH(MPI_Remove_error_code(klass), MPI_ERR_ARG); /* a class, not a code */
    FAILS_WITH(MPI_Remove_error_string(MPI_ERR_RANK), MPI_ERR_ARG);
    FAILS_WITH(MPI_Remove_error_code(code), MPI_ERR_ARG); /* its string first (as mpi4py checks) */
    OK(MPI_Remove_error_string(code));
    OK(MPI_Error_string(code, s, &len));
    CHECK(strcmp(s, "a code of ours") != 0, "string still %s", s);
    FAILS_WITH(MPI_Remove_error_string(code), MPI_ERR_ARG); /* no string any more */
    OK(MPI_Error_class(code, &k));
    CHECK(k == klass, "class %d of %d", k, code);
    OK(MPI_Remove_error_code(code));
    FAILS_WITH(MPI_Error_class(code, &k), MPI_ERR_ARG);
    FAILS_WITH(MPI_Remove_error_code(code), MPI_ERR_ARG);
    OK(MPI_Add_error_code(klass, &code2));
    OK(MPI_Remove_error_code(code2));
    OK(MPI_Add_error_string(klass, "a class of ours"));
    FAILS_WITH(MPI_Remove_error_class(klass), MPI_ERR_ARG); /* its string first */
    OK(MPI_Remove_error_string(klass));
    OK(MPI_Remove_error_class(klass));
    FAILS_WITH(MPI_Error_class(klass, &k), MPI_ERR_ARG);
    FAILS_WITH(MPI_Add_error_code(klass, &code), MPI_ERR_ARG);
}

static int info_has(MPI_Info info, const char *key, char *v, int cap) {
    int flag = 0;
    v[0] = 0;
    OK(MPI_Info_get(info, key, cap - 1, v, &flag));
    return flag;
}

static void abi_and_hardware(void) {
    int major = 0, minor = 0;
    char v[256];
    OK(MPI_Abi_get_version(&major, &minor));
    CHECK(major == -1 && minor == -1, "abi %d.%d", major, minor);
    MPI_Info info;
    OK(MPI_Abi_get_info(&info));
    CHECK(info_has(info, "mpi_aint_size", v, sizeof v) && atoi(v) == (int)sizeof(MPI_Aint), "aint %s", v);
    CHECK(info_has(info, "mpi_count_size", v, sizeof v) && atoi(v) == (int)sizeof(MPI_Count), "count %s", v);
    CHECK(info_has(info, "mpi_offset_size", v, sizeof v) && atoi(v) == (int)sizeof(MPI_Offset), "offset %s", v);
    OK(MPI_Info_free(&info));
    OK(MPI_Get_hw_resource_info(&info));
    CHECK(info_has(info, "mpi_hw_resource_type", v, sizeof v), "no mpi_hw_resource_type");
    CHECK(info_has(info, "nemesis_num_cpus", v, sizeof v) && atoi(v) >= 1, "cpus %s", v);
    OK(MPI_Info_free(&info));
}

static void mapping(int rank, int size) {
    int nr = -7, dims[2] = {2, 1}, periods[2] = {0, 1};
    if (size >= 2) {
        OK(MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &nr));
        CHECK(nr == (rank < 2 ? rank : MPI_UNDEFINED), "cart 2x1: %d", nr);
    }
    OK(MPI_Cart_map(MPI_COMM_WORLD, 0, dims, periods, &nr));
    CHECK(nr == (rank == 0 ? 0 : MPI_UNDEFINED), "cart of no dimension: %d", nr);
    int all[1] = {size};
    OK(MPI_Cart_map(MPI_COMM_WORLD, 1, all, periods, &nr));
    CHECK(nr == rank, "cart of all: %d", nr);
    int zero[1] = {0}, big[1] = {size + 1};
    OK(MPI_Cart_map(MPI_COMM_WORLD, 1, zero, periods, &nr));
    CHECK(nr == MPI_UNDEFINED, "empty cart: %d", nr);
    FAILS_WITH(MPI_Cart_map(MPI_COMM_WORLD, 1, big, periods, &nr), MPI_ERR_DIMS);
    FAILS_WITH(MPI_Cart_map(MPI_COMM_WORLD, -1, dims, periods, &nr), MPI_ERR_ARG);
    int index[1] = {0}, edges[1] = {0};
    OK(MPI_Graph_map(MPI_COMM_WORLD, 1, index, edges, &nr));
    CHECK(nr == (rank == 0 ? 0 : MPI_UNDEFINED), "graph of 1: %d", nr);
    OK(MPI_Graph_map(MPI_COMM_WORLD, 0, index, edges, &nr));
    CHECK(nr == MPI_UNDEFINED, "empty graph: %d", nr);
    FAILS_WITH(MPI_Graph_map(MPI_COMM_WORLD, size + 1, index, edges, &nr), MPI_ERR_ARG);
    FAILS_WITH(MPI_Graph_map(MPI_COMM_WORLD, -1, index, edges, &nr), MPI_ERR_ARG);
    /* On a split communicator: ranks are the communicator's. */
    MPI_Comm half;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
    int hrank, hsize;
    OK(MPI_Comm_rank(half, &hrank));
    OK(MPI_Comm_size(half, &hsize));
    int one[1] = {1};
    OK(MPI_Cart_map(half, 1, one, periods, &nr));
    CHECK(nr == (hrank == 0 ? 0 : MPI_UNDEFINED), "cart on half: %d (rank %d of %d)", nr, hrank, hsize);
    OK(MPI_Comm_free(&half));
}

int main(int argc, char **argv) {
    int rank, size;
    tools_before_init();
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    tools();
    OK(MPI_T_finalize());
    error_removal();
    abi_and_hardware();
    mapping(rank, size);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    /* MPI_T outlives MPI_Finalize. */
    int n = -1;
    OK(MPI_T_pvar_get_num(&n));
    CHECK(n == 0, "pvars after finalize %d", n);
    OK(MPI_T_finalize());
    CHECK(MPI_T_finalize() == MPI_T_ERR_NOT_INITIALIZED, "one MPI_T_finalize too many");
    printf("OK env_calls %d\n", rank);
    return 0;
}
