/* The info calls of MPI-4.0/4.1: MPI_Info_create_env (before MPI_Init too) with MPI_INFO_ENV's
 * keys, MPI_Info_get_string (the length query, a cut value, a missing key, bad input), and
 * MPI_INFO_ENV's contents after MPI_Init (maxprocs is the job's size). Prints
 * "OK info_calls <rank>". */
#include "check.h"

/* The value of KEY in INFO through MPI_Info_get_string (FLAG 0: not set). */
static int get_string(MPI_Info info, const char *key, char *value, int cap) {
    int flag = -1, len = 0;
    OK(MPI_Info_get_string(info, key, &len, NULL, &flag));
    if (!flag) return 0;
    CHECK(len >= 1 && len <= cap, "%s: length %d", key, len);
    int need = len;
    OK(MPI_Info_get_string(info, key, &len, value, &flag));
    CHECK(flag == 1 && len == need && (int)strlen(value) == need - 1, "%s: %s, length %d of %d", key, value, len,
          need);
    return 1;
}

int main(int argc, char **argv) {
    MPI_Info env, info;
    char v[1024];
    OK(MPI_Info_create_env(argc, argv, &env));
    CHECK(get_string(env, "command", v, sizeof v) && strstr(v, "info_calls") != NULL, "command %s", v);
    CHECK(get_string(env, "thread_level", v, sizeof v), "no thread_level");
    OK(MPI_Info_free(&env));

    int provided, rank, size;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Info_create_env(argc, argv, &env));
    CHECK(get_string(env, "maxprocs", v, sizeof v) && atoi(v) == size, "maxprocs %s of %d", v, size);
    CHECK(get_string(MPI_INFO_ENV, "maxprocs", v, sizeof v) && atoi(v) == size, "INFO_ENV maxprocs %s", v);
    CHECK(get_string(env, "wdir", v, sizeof v) && v[0] == '/', "wdir %s", v);
    CHECK(get_string(env, "host", v, sizeof v), "no host");
    CHECK(get_string(env, "arch", v, sizeof v), "no arch");
    OK(MPI_Info_free(&env));

    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "colour", "ultramarine"));
    int flag = -1, len = 4;
    char cut[4] = "xyz";
    OK(MPI_Info_get_string(info, "colour", &len, cut, &flag));
    CHECK(flag == 1 && strcmp(cut, "ult") == 0 && len == 12, "cut %s, length %d", cut, len);
    len = 0;
    OK(MPI_Info_get_string(info, "shape", &len, NULL, &flag));
    CHECK(flag == 0, "missing key found");
    FAILS_WITH(MPI_Info_get_string(info, "", &len, v, &flag), MPI_ERR_INFO_KEY);
    len = -1;
    FAILS_WITH(MPI_Info_get_string(info, "colour", &len, v, &flag), MPI_ERR_ARG);
    OK(MPI_Info_free(&info));
    FAILS_WITH(MPI_Info_get_string(info, "colour", &len, v, &flag), MPI_ERR_INFO);
    OK(MPI_Finalize());
    printf("OK info_calls %d\n", rank);
    return 0;
}
