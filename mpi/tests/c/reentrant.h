/* Shared by the reentrant_*.c programs: MPI_Init_thread at the level REENTRANT_LEVEL names
 * ("single" or "multiple", default single) and, under MPI_THREAD_MULTIPLE, a second thread that
 * keeps calling MPI (local calls: no messages to match) while the main thread's callbacks run
 * with the library's lock released: queries, and attributes of a communicator of its own set
 * over and over, whose delete callback (calling MPI too) runs in this thread meanwhile. */
#ifndef REENTRANT_H
#define REENTRANT_H

#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

static atomic_int reentrant_stop;
static atomic_long reentrant_spins;
static pthread_t reentrant_thread;
static int reentrant_multiple;
/* This process's rank in MPI_COMM_WORLD and its size (set by reentrant_init). */
static int rank, nranks;

static MPI_Comm reentrant_comm;
static int reentrant_key;
static long reentrant_deletes;

static int reentrant_delete(MPI_Comm comm, int key, void *val, void *extra) {
    (void)key, (void)extra;
    int r = -1;
    OK(MPI_Comm_rank(comm, &r));
    CHECK(r == rank && val == &reentrant_deletes, "the second thread's delete callback");
    reentrant_deletes++;
    return MPI_SUCCESS;
}

static void *reentrant_busy(void *arg) {
    (void)arg;
    long sets = 0;
    do {
        OK(MPI_Comm_set_attr(reentrant_comm, reentrant_key, &reentrant_deletes));
        sets++;
        int r = -1, flag = 0, size = 0;
        void *v = NULL;
        OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
        OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
        CHECK(flag && *(int *)v >= 32767, "MPI_TAG_UB from the second thread");
        OK(MPI_Type_size(MPI_DOUBLE, &size));
        CHECK(size == 8, "MPI_Type_size(MPI_DOUBLE) = %d", size);
        atomic_fetch_add(&reentrant_spins, 1);
    } while (!atomic_load(&reentrant_stop));
    OK(MPI_Comm_delete_attr(reentrant_comm, reentrant_key));
    CHECK(reentrant_deletes == sets, "%ld attributes set, %ld deleted", sets, reentrant_deletes);
    return NULL;
}

/* MPI_Init_thread at the requested level; starts the second thread under MULTIPLE. */
static void reentrant_init(int *argc, char ***argv) {
    const char *l = getenv("REENTRANT_LEVEL");
    reentrant_multiple = l && strcmp(l, "multiple") == 0;
    int want = reentrant_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, got = -1;
    OK(MPI_Init_thread(argc, argv, want, &got));
    CHECK(got == want, "asked thread level %d, got %d", want, got);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    check_rank = rank;
    if (!reentrant_multiple) return;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &reentrant_comm));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, reentrant_delete, &reentrant_key, NULL));
    CHECK(pthread_create(&reentrant_thread, NULL, reentrant_busy, NULL) == 0, "pthread_create");
}

/* Stops the second thread (before MPI_Finalize). */
static void reentrant_stop_thread(void) {
    if (!reentrant_multiple) return;
    atomic_store(&reentrant_stop, 1);
    CHECK(pthread_join(reentrant_thread, NULL) == 0, "pthread_join");
    OK(MPI_Comm_free(&reentrant_comm));
    OK(MPI_Comm_free_keyval(&reentrant_key));
}

#endif
