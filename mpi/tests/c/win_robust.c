/* A rank dies inside a one-sided critical section on a window of this node (run with nemesis-run --keep-going):
 * its survivors get MPIX_ERR_PROC_FAILED within seconds, never a hang.
 *
 * - "lock": the last rank takes the exclusive lock of rank 0's window, puts into it and SIGKILLs itself holding it;
 *   rank 0 asks for the exclusive lock, the ranks between for a shared one: each waits, finds the dead process
 *   and fails (the lock is never handed on: the dead holder's puts may be half done).
 * - "acc": the last rank accumulates long doubles (not one native atomic: under rank 0's accumulate mutex) into
 *   rank 0's window, call after call, and a thread SIGKILLs it 300 ms in; once it is dead every other rank's
 *   accumulate to rank 0 fails. Should the kill land between two calls (the mutex free: prints "MISSED"), the
 *   harness runs the job again.
 *
 * - "rlock" (4 ranks over two nodes): a rank on rank 0's node dies holding rank 0's exclusive lock; a rank of the
 *   other node asks rank 0 (by active message) for the lock: rank 0 abandons the request and answers
 *   MPIX_ERR_PROC_FAILED, while it waits for that rank's message (without the answer, both wait forever).
 * - "size" (over two nodes: the remote path's active messages): a get whose target type repeats one double of an
 *   8-byte window 2^23 + 1 times asks the target for a reply of 64 MiB + 8 bytes, past its limit (64 MiB, or its
 *   window's size if larger): MPI_ERR_SIZE from the flush, nothing allocated at the target; 2^23 times is the limit
 *   and moves; the window still works after. On one node (load/store, CMA: nothing to allocate) both move.
 *
 * Prints "OK win_robust <rank>" on the survivors. Without the dead-holder check the survivors hang (the harness's
 * time limit fails the test). */
#include "check.h"
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ELEMS (1 << 19)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *killer(void *arg) {
    (void)arg;
    usleep(300 * 1000);
    raise(SIGKILL);
    return NULL;
}

/* The "rlock" case. */
static int remote_lock(int rank, int size) {
    long *base;
    MPI_Win win;
    OK(MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Comm node;
    int first = rank, leader[64];
    CHECK(size <= 64, "at most 64 ranks");
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    OK(MPI_Bcast(&first, 1, MPI_INT, 0, node));
    OK(MPI_Comm_free(&node));
    OK(MPI_Allgather(&first, 1, MPI_INT, leader, 1, MPI_INT, MPI_COMM_WORLD));
    int killer = -1, remote = -1;
    for (int r = size - 1; r > 0; r--) {
        if (leader[r] == leader[0]) killer = r;
        else remote = r;
    }
    CHECK(killer > 0 && remote > 0, "rank 0's node needs a second rank and the other node one (4 ranks, 2 nodes)");
    if (rank == killer) OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == killer) raise(SIGKILL);
    int done = 0;
    if (rank == remote) {
        usleep(200 * 1000);
        double t0 = now();
        int rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        double waited = now() - t0;
        CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "MPI_Win_lock returned class %d, expected MPIX_ERR_PROC_FAILED",
              class_of(rc));
        CHECK(waited < 10.0, "the failure took %.1f s", waited);
        done = 1;
        for (int r = 0; r < size; r++)
            if (r != rank && r != killer) OK(MPI_Send(&done, 1, MPI_INT, r, 7, MPI_COMM_WORLD));
        printf("OK win_robust %d (%.2f s)\n", rank, waited);
    } else {
        OK(MPI_Recv(&done, 1, MPI_INT, remote, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        printf("OK win_robust %d (told)\n", rank);
    }
    fflush(stdout);
    _exit(0);
}

/* The "size" case: rank 1 gets from rank 0 (on the other node under --nodes 2). */
static int sizes(int rank) {
    double *base;
    MPI_Win win;
    OK(MPI_Win_allocate(sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    *base = 2.5;
    OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Comm node;
    int n;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    OK(MPI_Comm_size(node, &n));
    int remote = n == 1;
    OK(MPI_Comm_free(&node));
    if (rank == 1) {
        const int limit = 1 << 23; /* 64 MiB of doubles */
        double *out = malloc((size_t)(limit + 1) * sizeof(double));
        CHECK(out != NULL, "malloc");
        MPI_Datatype again;
        OK(MPI_Type_create_hvector(limit + 1, 1, 0, MPI_DOUBLE, &again));
        OK(MPI_Type_commit(&again));
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        OK(MPI_Get(out, limit + 1, MPI_DOUBLE, 0, 0, 1, again, win));
        if (remote)
            FAILS_WITH(MPI_Win_flush(0, win), MPI_ERR_SIZE);
        else
            OK(MPI_Win_flush(0, win));
        out[limit - 1] = 0;
        OK(MPI_Type_free(&again));
        OK(MPI_Type_create_hvector(limit, 1, 0, MPI_DOUBLE, &again));
        OK(MPI_Type_commit(&again));
        OK(MPI_Get(out, limit, MPI_DOUBLE, 0, 0, 1, again, win));
        OK(MPI_Win_flush(0, win));
        CHECK(out[0] == 2.5 && out[limit - 1] == 2.5, "a get at the limit read %g, %g", out[0], out[limit - 1]);
        double x = 4.0;
        OK(MPI_Put(&x, 1, MPI_DOUBLE, 0, 0, 1, MPI_DOUBLE, win));
        OK(MPI_Win_unlock(0, win));
        OK(MPI_Type_free(&again));
        free(out);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) CHECK(*base == 4.0, "the put after a refused get: %g", *base);
    OK(MPI_Win_free(&win));
    printf("OK win_robust %d (%s)\n", rank, remote ? "remote" : "local");
    OK(MPI_Finalize());
    return 0;
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(argc == 2 && (!strcmp(argv[1], "lock") || !strcmp(argv[1], "acc") || !strcmp(argv[1], "size") ||
                        !strcmp(argv[1], "rlock")),
          "usage: win_robust lock|acc|rlock|size");
    if (!strcmp(argv[1], "size")) return sizes(rank);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (!strcmp(argv[1], "rlock")) return remote_lock(rank, size);
    int acc = !strcmp(argv[1], "acc");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    long double *base;
    MPI_Aint bytes = rank == 0 ? (MPI_Aint)(ELEMS * sizeof(long double)) : 0;
    MPI_Win win;
    OK(MPI_Win_allocate(bytes, sizeof(long double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int last = rank == size - 1;
    static long double ones[ELEMS];
    for (int i = 0; i < ELEMS; i++) ones[i] = 1.0L;
    if (acc) OK(MPI_Win_lock_all(0, win));
    if (last && !acc) {
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Put(ones, 8, MPI_LONG_DOUBLE, 0, 0, 8, MPI_LONG_DOUBLE, win));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (last && !acc) raise(SIGKILL);
    if (last) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, killer, NULL) == 0, "pthread_create");
        for (;;) OK(MPI_Accumulate(ones, ELEMS, MPI_LONG_DOUBLE, 0, 0, ELEMS, MPI_LONG_DOUBLE, MPI_SUM, win));
    }
    /* The last rank is dead (or dies) by now. */
    usleep(acc ? 1000 * 1000 : 200 * 1000);
    double t0 = now();
    int rc;
    if (acc) {
        rc = MPI_Accumulate(ones, 1, MPI_LONG_DOUBLE, 0, 0, 1, MPI_LONG_DOUBLE, MPI_SUM, win);
        if (rc == MPI_SUCCESS) rc = MPI_Win_flush(0, win);
        if (rc == MPI_SUCCESS) {
            printf("MISSED win_robust %d: the dying rank held no mutex\n", rank);
            fflush(stdout);
            _exit(0);
        }
    } else {
        rc = MPI_Win_lock(rank == 0 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, win);
    }
    double waited = now() - t0;
    CHECK(class_of(rc) == MPIX_ERR_PROC_FAILED, "%s returned %d (class %d), expected MPIX_ERR_PROC_FAILED",
          acc ? "MPI_Accumulate" : "MPI_Win_lock", rc, class_of(rc));
    CHECK(waited < 10.0, "the failure took %.1f s", waited);
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    OK(MPI_Error_string(rc, msg, &len));
    CHECK(strstr(msg, "died") != NULL, "the error says nothing of a death: %s", msg);
    printf("OK win_robust %d (%.2f s)\n", rank, waited);
    fflush(stdout);
    _exit(0);
}
