/* The environment: MPI_Initialized/MPI_Finalized around init and finalize, MPI_Init_thread and
 * the level granted (the one required), MPI_Query_thread, MPI_Is_thread_main
 * (false on another thread), versions, the processor name, MPI_Wtime and MPI_Wtick, datatype
 * sizes. Prints "OK env <rank>". */
#include "check.h"
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

static void *other_thread(void *arg) {
    int *flag = arg;
    /* MPI_THREAD_MULTIPLE: another thread may call at any time. */
    MPI_Is_thread_main(flag);
    return NULL;
}

int main(int argc, char **argv) {
    int flag = -1, provided = -1, rank;
    OK(MPI_Initialized(&flag));
    CHECK(flag == 0, "initialized before init");
    OK(MPI_Finalized(&flag));
    CHECK(flag == 0, "finalized before init");
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d for MULTIPLE", provided);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    check_rank = rank;
    OK(MPI_Query_thread(&flag));
    CHECK(flag == MPI_THREAD_MULTIPLE, "query_thread %d", flag);
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1, "initialized");
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1, "main thread");
    pthread_t t;
    int other = -1;
    CHECK(pthread_create(&t, NULL, other_thread, &other) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(other == 0, "is_thread_main on another thread: %d", other);

    int v = 0, sv = 0;
    OK(MPI_Get_version(&v, &sv));
    CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION && v == 4 && sv == 1, "version %d.%d", v, sv);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    OK(MPI_Get_library_version(lib, &len));
    CHECK(len == (int)strlen(lib) && strstr(lib, "nemesis") != NULL, "library version %s", lib);
    char name[MPI_MAX_PROCESSOR_NAME], host[256] = {0};
    OK(MPI_Get_processor_name(name, &len));
    gethostname(host, sizeof host - 1);
    CHECK(len == (int)strlen(name) && len > 0, "processor name %s", name);
    CHECK(strncmp(name, host, (size_t)len) == 0, "processor name %s, host %s", name, host);

    double tick = MPI_Wtick(), t0 = MPI_Wtime();
    CHECK(tick > 0 && tick <= 1e-3, "wtick %g", tick);
    usleep(20000);
    double t1 = MPI_Wtime();
    CHECK(t1 - t0 >= 0.019 && t1 - t0 < 5, "20 ms measured as %f s", t1 - t0);
    CHECK(PMPI_Wtime() >= t1, "PMPI_Wtime");

    struct { MPI_Datatype t; int size; } types[] = {
        {MPI_CHAR, 1}, {MPI_SIGNED_CHAR, 1}, {MPI_UNSIGNED_CHAR, 1}, {MPI_BYTE, 1},
        {MPI_SHORT, sizeof(short)}, {MPI_UNSIGNED_SHORT, sizeof(unsigned short)}, {MPI_INT, sizeof(int)},
        {MPI_UNSIGNED, sizeof(unsigned)}, {MPI_LONG, sizeof(long)}, {MPI_UNSIGNED_LONG, sizeof(unsigned long)},
        {MPI_LONG_LONG, sizeof(long long)}, {MPI_LONG_LONG_INT, sizeof(long long)},
        {MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long)}, {MPI_FLOAT, sizeof(float)}, {MPI_DOUBLE, sizeof(double)},
        {MPI_INT8_T, 1}, {MPI_INT16_T, 2}, {MPI_INT32_T, 4}, {MPI_INT64_T, 8},
        {MPI_UINT8_T, 1}, {MPI_UINT16_T, 2}, {MPI_UINT32_T, 4}, {MPI_UINT64_T, 8},
    };
    for (unsigned i = 0; i < sizeof types / sizeof types[0]; i++) {
        int s = -1;
        OK(MPI_Type_size(types[i].t, &s));
        CHECK(s == types[i].size, "type %u: size %d, expected %d", i, s, types[i].size);
    }
    MPI_Errhandler eh = MPI_ERRORS_RETURN;
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "errhandler_free");

    printf("OK env %d\n", rank);
    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag));
    CHECK(flag == 1, "finalized after finalize");
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1, "initialized after finalize");
    return 0;
}
